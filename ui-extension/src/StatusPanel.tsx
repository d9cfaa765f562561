import {useEffect, useState} from 'react';
import {Client} from './api';
import {stageLabel} from './actions';
import {versionLabel} from './format';
import {POLL_MS, PromotionTab, isThisApp, useClient} from './PromotionTab';
import {asApiError} from './state';
import {ensureStyles} from './styles';
import type {Application, Pipeline} from './types';

export interface StatusPanelProps {
  application: Application;
  openFlyout?: () => void;
  client?: Client;
  pollMs?: number;
}

// One line in the Application's status panel: this Application's stage, what it runs and what its
// candidate waits for; a click opens the whole tab in Argo CD's flyout. It polls as the tab does:
// Argo CD re-renders it only when the Application changes, and a Stage moves on (verified, a gate
// opened) without that.
export function StatusPanelItem({application, openFlyout, client: injected, pollMs = POLL_MS}: StatusPanelProps) {
  ensureStyles();
  const client = useClient(application, injected);
  const [text, setText] = useState<{line: string; title: string; bad: boolean}>({line: 'loading…', title: '', bad: false});

  useEffect(() => {
    const ctl = new AbortController();
    const load = () =>
      client.pipeline(ctl.signal).then(
        (p) => setText(summary(p, application)),
        (e) => {
          if (ctl.signal.aborted) return;
          const err = asApiError(e);
          setText({line: err.unreachable ? 'not reachable' : err.status === 404 ? 'not in a pipeline' : 'error', title: err.message, bad: true});
        },
      );
    void load();
    const t = setInterval(() => {
      if (!document.hidden) void load();
    }, pollMs);
    return () => {
      clearInterval(t);
      ctl.abort();
    };
  }, [client, application, pollMs]);

  return (
    <div className="application-status-panel__item stagecoach sc-panel">
      <label className="sc-panel-label">PROMOTION</label>
      <button
        type="button"
        className={`sc-link${text.bad ? ' sc-link--bad' : ''}`}
        title={text.title || 'Open the promotion pipeline'}
        onClick={() => openFlyout?.()}
      >
        {text.line}
      </button>
    </div>
  );
}

export function summary(p: Pipeline, application: Application): {line: string; title: string; bad: boolean} {
  const stage = (p.stages ?? []).find((s) => isThisApp(s, application));
  if (!stage) return {line: p.service, title: `Stages of ${p.service}`, bad: false};
  let line = `${stageLabel(stage)} ${versionLabel(stage.current) || '–'}`;
  let title = `${p.service}: ${stageLabel(stage)} runs ${versionLabel(stage.current) || 'nothing yet'}`;
  const c = stage.candidate;
  if (stage.frozen) line += ' · frozen';
  if (c) {
    const gates = (c.blocked ?? []).map((b) => b.gate);
    line += ` ← ${versionLabel(c)}${gates.length ? ` (${gates.join(', ')})` : ''}`;
    title += `; candidate ${versionLabel(c)}${gates.length ? ` waits for ${gates.join(', ')}` : ' is not blocked'}`;
  }
  return {line, title, bad: stage.health === 'Degraded'};
}

// The status panel's flyout: the same view as the tab.
export function PromotionFlyout({application}: {application: Application}) {
  return <PromotionTab application={application} />;
}
