import {describe, expect, it} from 'vitest';
import {ApiError, Client, NOT_REACHABLE, appHeaders, appRef} from '../src/api';
import {app, fakeFetch, json, pipeline} from './fixtures';

const ref = appRef(app);

describe('Client', () => {
  it('GETs the pipeline of the Application with the two headers Argo CD requires', async () => {
    const f = fakeFetch([['GET /apps/argocd/shop-staging/pipeline', () => json(200, pipeline())]]);
    const p = await new Client(ref, {fetch: f.fetch}).pipeline();
    expect(p.service).toBe('shop');
    expect(f.calls).toHaveLength(1);
    expect(f.calls[0].url).toBe('/extensions/stagecoach/api/v1/apps/argocd/shop-staging/pipeline');
    expect(f.calls[0].headers).toMatchObject({'Argocd-Application-Name': 'argocd:shop-staging', 'Argocd-Project-Name': 'shop'});
  });

  it.each([
    ['promote', {version: 'v1.3.0'}],
    ['approve', {digest: 'sha256:abc', comment: 'ok'}],
    ['rollback', {reason: 'bad'}],
    ['freeze', {reason: 'release', until: '2h'}],
    ['unfreeze', {}],
  ] as const)('POSTs %s to the Stage with its body and the Argo CD headers', async (action, body) => {
    const f = fakeFetch([[`POST /stages/shop-prod/prod/${action}`, () => json(201, {kind: 'Promotion', namespace: 'shop-prod', name: 'x', message: 'queued'})]]);
    const r = await new Client(ref, {fetch: f.fetch}).act({namespace: 'shop-prod', name: 'prod'}, action, body);
    expect(r.name).toBe('x');
    expect(f.calls[0].method).toBe('POST');
    expect(f.calls[0].body).toEqual(body);
    expect(f.calls[0].headers).toMatchObject({...appHeaders(ref), 'Content-Type': 'application/json'});
  });

  it('escapes path segments', async () => {
    const f = fakeFetch([['GET /pipeline', () => json(200, pipeline())]]);
    await new Client({namespace: 'a b', name: 'c/d', project: 'p'}, {fetch: f.fetch}).pipeline();
    expect(f.calls[0].url).toBe('/extensions/stagecoach/api/v1/apps/a%20b/c%2Fd/pipeline');
  });

  it('uses a configured base URL', async () => {
    const f = fakeFetch([['GET /pipeline', () => json(200, pipeline())]]);
    await new Client(ref, {fetch: f.fetch, base: 'http://x/api/v1/'}).pipeline();
    expect(f.calls[0].url).toBe('http://x/api/v1/apps/argocd/shop-staging/pipeline');
  });
});

describe('Client errors', () => {
  const cases: Array<{name: string; answer: () => Response | Promise<Response>; status: number; unreachable: boolean; message: RegExp}> = [
    {
      name: 'a JSON refusal carries the API server message',
      answer: () => json(403, {code: 403, reason: 'Forbidden', message: 'approvals.stagecoach.dev is forbidden: User "eve" cannot create resource "approvals"'}),
      status: 403, unreachable: false, message: /User "eve" cannot create resource "approvals"/,
    },
    {
      name: 'a network failure means Stagecoach is not reachable',
      answer: () => Promise.reject(new TypeError('Failed to fetch')),
      status: 0, unreachable: true, message: new RegExp(`^${NOT_REACHABLE} \\(Failed to fetch\\)`),
    },
    {
      name: "Argo CD's own 502 means Stagecoach is not reachable",
      answer: () => new Response('<html>Bad Gateway</html>', {status: 502}),
      status: 0, unreachable: true, message: /not reachable \(Argo CD's proxy answered 502\)/,
    },
    {
      name: 'a non-JSON error keeps the status and a snippet of the body',
      answer: () => new Response('extension not found', {status: 404, statusText: 'Not Found'}),
      status: 404, unreachable: false, message: /^HTTP 404: extension not found$/,
    },
    {
      // argocd-server's auth middleware answers before the proxy: no argocd.token cookie is a plain-text 400.
      name: "Argo CD's 400 for a missing session says to log in again",
      answer: () => new Response('Auth cookie not found\n', {status: 400, statusText: 'Bad Request'}),
      status: 400, unreachable: false, message: /^Your Argo CD session has ended \(Argo CD answered 400: Auth cookie not found\)\. Log in again\.$/,
    },
    {
      name: "Argo CD's 401 for an expired token says to log in again, not that the proxy token is wrong",
      answer: () => new Response('Invalid token\n', {status: 401, statusText: 'Unauthorized'}),
      status: 401, unreachable: false, message: /^Your Argo CD session has ended \(Argo CD answered 401: Invalid token\)/,
    },
    {
      name: 'a 200 without JSON is an error',
      answer: () => new Response('<html></html>', {status: 200}),
      status: 200, unreachable: false, message: /without JSON/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const f = fakeFetch([['GET /pipeline', c.answer]]);
      const err = await new Client(ref, {fetch: f.fetch}).pipeline().catch((e) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect(err.status).toBe(c.status);
      expect(err.unreachable).toBe(c.unreachable);
      expect(err.message).toMatch(c.message);
      expect(err.sessionEnded).toBe(/session has ended/.test(err.message));
    });
  }

  it('gives up after the timeout and says Stagecoach is not reachable', async () => {
    const hang: typeof fetch = (_i, init) =>
      new Promise((_res, rej) => init?.signal?.addEventListener('abort', () => rej(new DOMException('aborted', 'AbortError'))));
    const err = await new Client(ref, {fetch: hang, timeoutMs: 20}).pipeline().catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.message).toMatch(/not reachable \(no answer within 0 s\)/);
  });
});
