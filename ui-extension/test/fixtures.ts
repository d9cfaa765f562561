import {vi} from 'vitest';
import type {Application, Pipeline} from '../src/types';

export const app: Application = {metadata: {name: 'shop-staging', namespace: 'argocd'}, spec: {project: 'shop'}};

export function pipeline(over: Partial<Pipeline> = {}): Pipeline {
  return {
    service: 'shop',
    viewer: {user: 'alice', groups: ['ops'], readOnly: false},
    stages: [
      {
        namespace: 'shop-dev', name: 'dev', environment: 'dev',
        applier: {kind: 'Application', namespace: 'argocd', name: 'shop-dev'},
        current: {tag: 'v1.3.0', digest: 'sha256:3333333333333333333333333333333333333333333333333333333333333333', since: '2026-12-01T09:00:00Z'},
        health: 'Healthy', ready: {status: 'True', reason: 'Verified', message: 'v1.3.0 verified'},
        frozen: false, frozenReason: '', candidate: null,
        promotions: [
          {name: 'dev-v1.3.0', action: 'Promote', phase: 'Succeeded', tag: 'v1.3.0', digest: 'sha256:3333', actor: 'stagecoach', reason: 'automatic', startedAt: '2026-12-01T08:55:00Z', finishedAt: '2026-12-01T09:00:00Z', message: ''},
        ],
      },
      {
        namespace: 'shop-staging', name: 'staging', environment: 'staging',
        applier: {kind: 'Application', namespace: 'argocd', name: 'shop-staging'},
        current: {tag: 'v1.2.0', digest: 'sha256:2222222222222222222222222222222222222222222222222222222222222222', since: '2026-11-30T10:00:00Z'},
        health: 'Healthy', ready: {status: 'True', reason: 'Verified', message: ''},
        frozen: false, frozenReason: '',
        candidate: {
          tag: 'v1.3.0', digest: 'sha256:3333333333333333333333333333333333333333333333333333333333333333',
          blocked: [
            {gate: 'approval', reason: 'ApprovalRequired', message: '1 of 2 approvals from group release', until: ''},
            {gate: 'window', reason: 'OutsideWindow', message: 'deny window "weekend" is open', until: '2026-12-01T12:30:00Z'},
          ],
        },
        promotions: [
          {name: 'staging-rb-1', action: 'Rollback', phase: 'Succeeded', tag: 'v1.2.0', digest: 'sha256:2222', actor: 'bob', reason: 'errors spiked', startedAt: '2026-11-30T10:00:00Z', finishedAt: '2026-11-30T10:02:00Z', message: ''},
          {name: 'staging-v1.2.1', action: 'Promote', phase: 'Failed', tag: 'v1.2.1', digest: 'sha256:2121', actor: 'alice', reason: '', startedAt: '2026-11-30T09:00:00Z', finishedAt: '2026-11-30T09:30:00Z', message: 'verification check failed'},
        ],
      },
      {
        namespace: 'shop-prod', name: 'prod', environment: 'prod',
        applier: {kind: 'Application', namespace: 'argocd', name: 'shop-prod'},
        current: null, health: 'Unknown', ready: {status: 'Unknown', reason: '', message: ''},
        frozen: true, frozenReason: 'holiday freeze', candidate: null, promotions: [],
      },
    ],
    ...over,
  };
}

export interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

type Handler = (c: Call) => Response | Promise<Response>;

// A fetch that records every call and answers from a list of [method path-suffix, handler].
export function fakeFetch(routes: Array<[string, Handler]>) {
  const calls: Call[] = [];
  const fn = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    const c: Call = {
      method: init?.method ?? 'GET',
      url: String(input),
      headers: {...(init?.headers as Record<string, string>)},
      body: init?.body ? JSON.parse(String(init.body)) : undefined,
    };
    calls.push(c);
    for (const [key, h] of routes) {
      const [m, suffix] = key.split(' ');
      if (m === c.method && c.url.endsWith(suffix)) return h(c);
    }
    return json(404, {code: 404, reason: 'NotFound', message: `no route for ${c.method} ${c.url}`});
  });
  return {fetch: fn as unknown as typeof fetch, calls};
}

export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {status, headers: {'Content-Type': 'application/json'}});
}
