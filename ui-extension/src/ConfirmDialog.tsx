import {useEffect, useId, useRef} from 'react';
import type {KeyboardEvent} from 'react';
import {missing, plan} from './actions';
import type {Field} from './actions';
import type {Dialog} from './state';
import type {Viewer} from './types';
import type {ApiError} from './api';

const FIELD_LABEL: Record<Field, string> = {
  reason: 'Reason',
  comment: 'Comment',
  until: 'Until (RFC 3339 time or a duration such as 2h)',
};

export interface ConfirmDialogProps {
  dialog: Dialog;
  service: string;
  viewer?: Viewer;
  onInput: (field: Field, value: string) => void;
  onCancel: () => void;
  onConfirm: () => void;
}

// A modal confirmation: says what will happen, takes the optional inputs, keeps focus inside
// (Tab cycles, Escape cancels) and shows the API's refusal when there is one.
export function ConfirmDialog({dialog, service, viewer, onInput, onCancel, onConfirm}: ConfirmDialogProps) {
  const p = plan(dialog.action, dialog.stage, service, viewer);
  const lacking = missing(p, dialog.inputs);
  const ref = useRef<HTMLDivElement>(null);
  const id = useId();

  useEffect(() => {
    const first = ref.current?.querySelector<HTMLElement>('input, [data-confirm]');
    first?.focus();
  }, []);

  // Escape on the whole document: while a request runs its controls are disabled, and the browser
  // moves the focus of a disabled control to <body>, outside the dialog.
  const cancel = useRef(onCancel);
  cancel.current = onCancel;
  useEffect(() => {
    const onKey = (e: globalThis.KeyboardEvent) => {
      if (e.key === 'Escape') cancel.current();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);

  // When a request ends and the dialog stays (a refusal), focus returns into it.
  const wasSubmitting = useRef(false);
  useEffect(() => {
    if (wasSubmitting.current && !dialog.submitting) ref.current?.querySelector<HTMLElement>('[data-confirm]')?.focus();
    wasSubmitting.current = dialog.submitting;
  }, [dialog.submitting]);

  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    if (e.key !== 'Tab' || !ref.current) return;
    const focusable = Array.from(
      ref.current.querySelectorAll<HTMLElement>('input:not([disabled]), button:not([disabled])'),
    );
    if (focusable.length === 0) return;
    const first = focusable[0];
    const last = focusable[focusable.length - 1];
    if (e.shiftKey && document.activeElement === first) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && document.activeElement === last) {
      e.preventDefault();
      first.focus();
    }
  };

  return (
    <div className="sc-overlay">
      <div
        className="sc-dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby={`${id}-title`}
        aria-describedby={`${id}-effect`}
        ref={ref}
        onKeyDown={onKeyDown}
      >
        <h2 id={`${id}-title`}>{p.title}</h2>
        <p id={`${id}-effect`} className="sc-effect">
          {p.effect}
        </p>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (lacking.length === 0 && !dialog.submitting) onConfirm();
          }}
        >
          {p.fields.map((f) => (
            <label key={f} className="sc-field">
              <span>
                {FIELD_LABEL[f]}
                {p.required.includes(f) ? ' (required)' : ''}
              </span>
              <input
                type="text"
                name={f}
                value={dialog.inputs[f] ?? ''}
                disabled={dialog.submitting}
                required={p.required.includes(f)}
                onChange={(e) => onInput(f, e.target.value)}
              />
            </label>
          ))}
          {dialog.error && (
            <div className="sc-refusal" role="alert">
              <strong>{refusalTitle(dialog.error)}</strong> {dialog.error.message}
            </div>
          )}
          <div className="sc-dialog-buttons">
            <button type="button" className="sc-btn" onClick={onCancel} disabled={dialog.submitting}>
              Cancel
            </button>
            <button
              type="submit"
              className="sc-btn sc-btn--primary"
              data-confirm=""
              disabled={dialog.submitting || lacking.length > 0}
              title={lacking.length ? `Fill in: ${lacking.join(', ')}` : undefined}
            >
              {dialog.submitting ? 'Working…' : p.confirm}
            </button>
          </div>
        </form>
      </div>
    </div>
  );
}

export function refusalTitle(error: ApiError): string {
  const status = error.status;
  if (error.sessionEnded) return 'Not logged in to Argo CD:';
  if (status === 0) return 'Not sent:';
  if (status === 401) return 'Not authenticated (401):';
  if (status === 403) return 'Refused (403):';
  if (status === 409) return 'Conflict (409):';
  if (status === 422 || status === 400) return `Invalid (${status}):`;
  return `Failed (${status}):`;
}
