import type {ActionKind, ActionResult, Application, Pipeline} from './types';

// Argo CD's proxy extension forwards /extensions/stagecoach/<rest> to the Stagecoach API.
export const DEFAULT_BASE = '/extensions/stagecoach/api/v1';
const TIMEOUT_MS = 15000;

export const NOT_REACHABLE = 'Stagecoach is not reachable';

// ApiError carries what the UI shows: the HTTP status (0 when no answer came back), the API's
// reason and its human message (for refusals by the Kubernetes API server, that server's message).
export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(status: number, reason: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
  }
  get unreachable(): boolean {
    return this.status === 0 || this.reason === 'Unreachable';
  }
  // Argo CD refused the request for want of a valid session; it never reached Stagecoach.
  get sessionEnded(): boolean {
    return this.reason === SESSION_ENDED;
  }
}

const SESSION_ENDED = 'SessionEnded';

// What argocd-server's auth middleware (util/session WithAuthMiddleware, v3.6) answers in plain text
// before a request reaches the proxy extension: 400 without the argocd.token cookie, 401 when the
// token is invalid or expired. Stagecoach's own refusals are JSON, so a 401 from it (a wrong proxy
// token) is never mistaken for these.
const ARGOCD_SESSION_ERRORS: Record<number, RegExp> = {
  400: /^Auth cookie not found$/,
  401: /^Invalid (token|session)$/,
};

export interface AppRef {
  namespace: string;
  name: string;
  project: string;
}

// The Application's own namespace is Argo CD's control-plane namespace unless apps-in-any-namespace
// is used; Argo CD fills metadata.namespace in both cases.
export function appRef(app: Application): AppRef {
  return {namespace: app.metadata.namespace || 'argocd', name: app.metadata.name, project: app.spec.project};
}

// The two headers argocd-server requires on every proxy-extension request: it checks them against
// the user's RBAC before forwarding, and Stagecoach checks the Application belongs to the pipeline.
export function appHeaders(ref: AppRef): Record<string, string> {
  return {
    'Argocd-Application-Name': `${ref.namespace}:${ref.name}`,
    'Argocd-Project-Name': ref.project,
  };
}

export interface ClientOptions {
  base?: string;
  fetch?: typeof fetch;
  timeoutMs?: number;
}

export class Client {
  private readonly base: string;
  private readonly doFetch: typeof fetch;
  private readonly timeoutMs: number;
  constructor(readonly app: AppRef, opts: ClientOptions = {}) {
    this.base = (opts.base ?? DEFAULT_BASE).replace(/\/$/, '');
    // Bound to window: a bare fetch reference called as a method throws "Illegal invocation".
    this.doFetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.timeoutMs = opts.timeoutMs ?? TIMEOUT_MS;
  }

  pipeline(signal?: AbortSignal): Promise<Pipeline> {
    const {namespace, name} = this.app;
    return this.request<Pipeline>('GET', `/apps/${enc(namespace)}/${enc(name)}/pipeline`, undefined, signal);
  }

  act(stage: {namespace: string; name: string}, action: ActionKind, body: object): Promise<ActionResult> {
    return this.request<ActionResult>('POST', `/stages/${enc(stage.namespace)}/${enc(stage.name)}/${action}`, body);
  }

  private async request<T>(method: string, path: string, body?: object, outer?: AbortSignal): Promise<T> {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.timeoutMs);
    const onAbort = () => ctl.abort();
    outer?.addEventListener('abort', onAbort);
    const headers: Record<string, string> = {...appHeaders(this.app), Accept: 'application/json'};
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res: Response;
    try {
      res = await this.doFetch(this.base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'same-origin',
        signal: ctl.signal,
      });
    } catch (e) {
      if (outer?.aborted) throw e;
      const why = ctl.signal.aborted ? `no answer within ${Math.round(this.timeoutMs / 1000)} s` : errText(e);
      throw new ApiError(0, 'Unreachable', `${NOT_REACHABLE} (${why}).`);
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (res.ok) {
      if (json === undefined) throw new ApiError(res.status, 'BadResponse', `Stagecoach answered ${res.status} without JSON.`);
      return json as T;
    }
    throw toError(res.status, res.statusText, json, text);
  }
}

function toError(status: number, statusText: string, json: unknown, text: string): ApiError {
  const e = json as {message?: unknown; reason?: unknown} | undefined;
  if (e && typeof e.message === 'string' && e.message) {
    return new ApiError(status, typeof e.reason === 'string' ? e.reason : statusText, e.message);
  }
  // argocd-server answers 502/503/504 itself when the Stagecoach service is down or slow.
  if (status === 502 || status === 503 || status === 504) {
    return new ApiError(0, 'Unreachable', `${NOT_REACHABLE} (Argo CD's proxy answered ${status}).`);
  }
  const snippet = text.trim().slice(0, 200);
  if (ARGOCD_SESSION_ERRORS[status]?.test(snippet)) {
    return new ApiError(status, SESSION_ENDED, `Your Argo CD session has ended (Argo CD answered ${status}: ${snippet}). Log in again.`);
  }
  return new ApiError(status, statusText || `HTTP ${status}`, `HTTP ${status}${snippet ? `: ${snippet}` : ''}`);
}

function enc(s: string): string {
  return encodeURIComponent(s);
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
