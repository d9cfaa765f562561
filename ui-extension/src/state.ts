import {ApiError} from './api';
import type {Inputs, Field} from './actions';
import type {ActionKind, ActionResult, Pipeline, Stage} from './types';

// The tab's state. A refresh that fails keeps the pipeline already shown (and says it is stale);
// a refused action keeps its dialog open with the refusal, so the person can read it and cancel.

export interface Dialog {
  action: ActionKind;
  stage: Stage; // as it was when the button was pressed: the confirmation names what was seen
  inputs: Inputs;
  submitting: boolean;
  error: ApiError | null;
}

export interface Notice {
  kind: 'ok' | 'error';
  text: string;
}

export interface State {
  pipeline: Pipeline | null;
  loading: boolean;
  loadError: ApiError | null;
  dialog: Dialog | null;
  notice: Notice | null;
}

export const initialState: State = {pipeline: null, loading: true, loadError: null, dialog: null, notice: null};

export type Msg =
  | {type: 'load'}
  | {type: 'loaded'; pipeline: Pipeline}
  | {type: 'loadFailed'; error: ApiError}
  | {type: 'open'; action: ActionKind; stage: Stage}
  | {type: 'input'; field: Field; value: string}
  | {type: 'close'}
  | {type: 'submit'}
  | {type: 'submitted'; result: ActionResult}
  | {type: 'submitFailed'; error: ApiError}
  | {type: 'dismiss'};

export function reducer(s: State, m: Msg): State {
  switch (m.type) {
    case 'load':
      return {...s, loading: true};
    case 'loaded':
      return {...s, loading: false, loadError: null, pipeline: m.pipeline};
    case 'loadFailed':
      return {...s, loading: false, loadError: m.error};
    case 'open':
      if (s.pipeline?.viewer?.readOnly) return s;
      return {...s, dialog: {action: m.action, stage: m.stage, inputs: m.action === 'freeze' ? {until: '2h'} : {}, submitting: false, error: null}};
    case 'input':
      if (!s.dialog || s.dialog.submitting) return s;
      return {...s, dialog: {...s.dialog, inputs: {...s.dialog.inputs, [m.field]: m.value}}};
    case 'close':
      if (s.dialog?.submitting) return s;
      return {...s, dialog: null};
    case 'submit':
      if (!s.dialog || s.dialog.submitting) return s;
      return {...s, dialog: {...s.dialog, submitting: true, error: null}};
    case 'submitted':
      return {...s, dialog: null, notice: {kind: 'ok', text: resultText(m.result)}};
    case 'submitFailed':
      if (!s.dialog) return {...s, notice: {kind: 'error', text: m.error.message}};
      return {...s, dialog: {...s.dialog, submitting: false, error: m.error}};
    case 'dismiss':
      return {...s, notice: null};
  }
}

export function resultText(r: ActionResult): string {
  const what = `${r.kind} ${r.namespace}/${r.name} created`;
  return r.message ? `${what}: ${r.message}` : `${what}.`;
}

export function asApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  return new ApiError(0, 'Error', e instanceof Error ? e.message : String(e));
}
