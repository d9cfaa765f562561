import {useCallback, useEffect, useMemo, useReducer, useRef, useState} from 'react';
import {ApiError, Client, appRef} from './api';
import {body, READ_ONLY_WHY} from './actions';
import {ConfirmDialog} from './ConfirmDialog';
import {History} from './History';
import {StageCard} from './StageCard';
import {asApiError, initialState, reducer} from './state';
import {ensureStyles} from './styles';
import type {ActionKind, Application, Pipeline, Stage} from './types';

export interface PromotionTabProps {
  application: Application;
  client?: Client;
  pollMs?: number;
}

// How often the tab and the status panel read the pipeline again while shown.
export const POLL_MS = 15000;

export function useClient(application: Application, injected?: Client): Client {
  const {namespace, name, project} = appRef(application);
  return useMemo(() => injected ?? new Client({namespace, name, project}), [injected, namespace, name, project]);
}

export function isThisApp(stage: Stage, application: Application): boolean {
  const ref = appRef(application);
  return stage.applier?.kind === 'Application' && stage.applier.name === ref.name && stage.applier.namespace === ref.namespace;
}

export function PromotionTab({application, client: injected, pollMs = POLL_MS}: PromotionTabProps) {
  ensureStyles();
  const client = useClient(application, injected);
  const [state, dispatch] = useReducer(reducer, initialState);
  const [now, setNow] = useState(() => Date.now());
  const opener = useRef<HTMLElement | null>(null);
  const alive = useRef(new AbortController());

  const load = useCallback(async () => {
    dispatch({type: 'load'});
    try {
      const pipeline = await client.pipeline(alive.current.signal);
      dispatch({type: 'loaded', pipeline});
    } catch (e) {
      if (alive.current.signal.aborted) return;
      dispatch({type: 'loadFailed', error: asApiError(e)});
    }
    setNow(Date.now());
  }, [client]);

  useEffect(() => {
    alive.current = new AbortController();
    void load();
    const t = setInterval(() => {
      if (!document.hidden) void load();
    }, pollMs);
    return () => {
      clearInterval(t);
      alive.current.abort();
    };
  }, [load, pollMs]);

  const open = (action: ActionKind, stage: Stage) => {
    opener.current = document.activeElement as HTMLElement | null;
    dispatch({type: 'open', action, stage});
  };
  const close = () => {
    dispatch({type: 'close'});
  };
  // Focus returns to the button that opened the dialog.
  const hadDialog = useRef(false);
  useEffect(() => {
    if (hadDialog.current && !state.dialog) opener.current?.focus?.();
    hadDialog.current = !!state.dialog;
  }, [state.dialog]);

  const confirm = async () => {
    const d = state.dialog;
    if (!d) return;
    dispatch({type: 'submit'});
    try {
      const result = await client.act(d.stage, d.action, body(d.action, d.stage, d.inputs));
      dispatch({type: 'submitted', result});
      void load();
    } catch (e) {
      dispatch({type: 'submitFailed', error: asApiError(e)});
    }
  };

  const p = state.pipeline;
  return (
    <div className="stagecoach" data-testid="stagecoach-tab">
      {!p && state.loading && (
        <div className="sc-state" role="status">
          Loading the pipeline…
        </div>
      )}
      {!p && !state.loading && state.loadError && <LoadError error={state.loadError} onRetry={load} />}
      {p && (
        <PipelineView
          pipeline={p}
          application={application}
          now={now}
          loading={state.loading}
          staleError={state.loadError}
          notice={state.notice}
          onDismiss={() => dispatch({type: 'dismiss'})}
          onRefresh={load}
          onAction={open}
        />
      )}
      {p && state.dialog && (
        <ConfirmDialog
          dialog={state.dialog}
          service={p.service}
          viewer={p.viewer}
          onInput={(field, value) => dispatch({type: 'input', field, value})}
          onCancel={close}
          onConfirm={confirm}
        />
      )}
    </div>
  );
}

interface PipelineViewProps {
  pipeline: Pipeline;
  application: Application;
  now: number;
  loading: boolean;
  staleError: ApiError | null;
  notice: {kind: 'ok' | 'error'; text: string} | null;
  onDismiss: () => void;
  onRefresh: () => void;
  onAction: (action: ActionKind, stage: Stage) => void;
}

function PipelineView({pipeline, application, now, loading, staleError, notice, onDismiss, onRefresh, onAction}: PipelineViewProps) {
  const stages = pipeline.stages ?? [];
  const viewer = pipeline.viewer;
  return (
    <>
      <header className="sc-head">
        <h2>
          Promotion pipeline <span className="sc-service">{pipeline.service}</span>
        </h2>
        <span className="sc-muted sc-viewer">
          {viewer?.readOnly || !viewer?.user
            ? 'anonymous (read-only)'
            : `as ${viewer.user}${viewer.groups?.length ? ` (${viewer.groups.join(', ')})` : ''}`}
        </span>
        <button type="button" className="sc-btn" onClick={onRefresh} disabled={loading}>
          {loading ? 'Refreshing…' : 'Refresh'}
        </button>
      </header>
      {viewer?.readOnly && (
        <p className="sc-banner sc-banner--info" role="note">
          {READ_ONLY_WHY}
        </p>
      )}
      {notice && (
        <div className={`sc-banner sc-banner--${notice.kind}`} role="status">
          <span>{notice.text}</span>
          <button type="button" className="sc-btn sc-btn--small" onClick={onDismiss} aria-label="Dismiss">
            ×
          </button>
        </div>
      )}
      {staleError && (
        <p className="sc-banner sc-banner--error" role="alert">
          {staleError.unreachable ? staleError.message : `Could not refresh: ${staleError.message}`} Showing what was loaded
          before.
        </p>
      )}
      {stages.length === 0 ? (
        <p className="sc-state">The pipeline of {pipeline.service} has no Stages yet.</p>
      ) : (
        <ol className="sc-pipeline" aria-label={`Stages of ${pipeline.service}, in promotion order`}>
          {stages.map((s) => (
            <li key={`${s.namespace}/${s.name}`}>
              <StageCard stage={s} viewer={viewer} isThisApp={isThisApp(s, application)} now={now} onAction={onAction} />
            </li>
          ))}
        </ol>
      )}
      <History stages={stages} now={now} />
    </>
  );
}

export function LoadError({error, onRetry}: {error: ApiError; onRetry: () => void}) {
  let title = 'Could not load the pipeline';
  let hint = '';
  if (error.unreachable) {
    title = 'Stagecoach is not reachable';
    hint =
      'Check that the Stagecoach API runs (controller flag --api-bind-address), that argocd-cm has extension.config.stagecoach and that server.enable.proxy.extension is "true".';
  } else if (error.sessionEnded) {
    title = 'Log in to Argo CD again';
    hint = 'Reload the page: Argo CD asks for a login, then the tab loads.';
  } else if (error.status === 401) {
    title = 'Argo CD and Stagecoach do not agree on the proxy token';
    hint = 'The Authorization header configured in extension.config.stagecoach must match the token the Stagecoach API was given.';
  } else if (error.status === 403) {
    title = 'Not allowed';
    hint = 'Argo CD RBAC needs "extensions, invoke, stagecoach" and "applications, get" on this Application.';
  } else if (error.status === 404) {
    title = 'No Stagecoach pipeline applies this Application';
    hint = 'A Stage names this Application in spec.applyRef, and the Application carries the label stagecoach.dev/stage.';
  }
  return (
    <div className="sc-state sc-state--error" role="alert">
      <h2>{title}</h2>
      <p>{error.message}</p>
      {hint && <p className="sc-muted">{hint}</p>}
      <button type="button" className="sc-btn" onClick={onRetry}>
        Retry
      </button>
    </div>
  );
}
