import {absolute, relative, shortDigest, versionLabel} from './format';
import {buttons, stageLabel} from './actions';
import type {ActionKind, Block, Stage, Viewer} from './types';

export interface StageCardProps {
  stage: Stage;
  viewer?: Viewer;
  isThisApp: boolean;
  now: number;
  onAction: (action: ActionKind, stage: Stage) => void;
}

export function StageCard({stage, viewer, isThisApp, now, onAction}: StageCardProps) {
  const label = stageLabel(stage);
  const health = stage.frozen ? 'Frozen' : stage.health || 'Unknown';
  return (
    <section className={`sc-stage${isThisApp ? ' sc-stage--this' : ''}`} aria-label={`Stage ${label}`}>
      <header className="sc-stage-head">
        <h3>{label}</h3>
        <span className="sc-muted">
          {stage.namespace}/{stage.name}
        </span>
        {isThisApp && <span className="sc-tag">this Application</span>}
      </header>
      <dl className="sc-facts">
        <dt>Version</dt>
        <dd title={stage.current?.digest || undefined}>
          {stage.current ? <code>{versionLabel(stage.current)}</code> : <span className="sc-muted">nothing deployed</span>}
        </dd>
        <dt>Health</dt>
        <dd>
          <span className={`sc-health sc-health--${health.toLowerCase()}`} title={stage.ready?.message || undefined}>
            {health}
          </span>
          {stage.ready?.status === 'False' && stage.ready.reason && <span className="sc-muted"> {stage.ready.reason}</span>}
        </dd>
        <dt>Since</dt>
        <dd>
          {stage.current?.since ? (
            <time dateTime={stage.current.since} title={absolute(stage.current.since)}>
              {relative(stage.current.since, now)}
            </time>
          ) : (
            <span className="sc-muted">–</span>
          )}
        </dd>
      </dl>
      {stage.frozen && (
        <p className="sc-frozen">
          Frozen{stage.frozenReason ? `: ${stage.frozenReason}` : ''}
        </p>
      )}
      {stage.held && <p className="sc-held">Automation held: {stage.held}</p>}
      <CandidateView stage={stage} now={now} />
      {stage.waves && stage.waves.length > 0 && (
        <ul className="sc-waves" aria-label={`Waves of ${label}`}>
          {stage.waves.map((w) => (
            <li key={w.name}>
              {w.name}: {w.phase} ({count(w.completed)}/{count(w.targets)}
              {count(w.failed) ? `, ${count(w.failed)} failed` : ''}){w.message ? ` – ${w.message}` : ''}
            </li>
          ))}
        </ul>
      )}
      {stage.records && stage.records.length > 0 && (
        <ul className="sc-records" aria-label={`Records of ${label}`}>
          {stage.records.map((r) => (
            <li key={`${r.stream}/${r.seq}`} title={r.stream}>
              record #{r.seq} <code>{r.ref}</code>
            </li>
          ))}
        </ul>
      )}
      {stage.plan && (
        <details className="sc-plan">
          <summary>Why (plan)</summary>
          <pre>{stage.plan}</pre>
        </details>
      )}
      <div className="sc-actions" role="group" aria-label={`Actions on ${label}`}>
        {buttons(stage, viewer).map((b) => (
          <button
            key={b.action}
            type="button"
            className={`sc-btn${b.action === 'promote' ? ' sc-btn--primary' : ''}`}
            disabled={!b.enabled}
            title={b.why}
            onClick={() => onAction(b.action, stage)}
          >
            {b.label}
          </button>
        ))}
      </div>
    </section>
  );
}

export function count(v: string[] | number | null | undefined): number {
  return Array.isArray(v) ? v.length : (v ?? 0);
}

function CandidateView({stage, now}: {stage: Stage; now: number}) {
  const c = stage.candidate;
  if (!c) return <p className="sc-candidate sc-muted">No candidate: this stage runs the newest version it may.</p>;
  const blocked = c.blocked ?? [];
  return (
    <div className="sc-candidate">
      <div>
        Candidate <code title={c.digest}>{versionLabel(c)}</code>
        {c.tag && c.digest && <span className="sc-muted"> {shortDigest(c.digest)}</span>}
      </div>
      {blocked.length === 0 ? (
        <p className="sc-open">Nothing blocks it.</p>
      ) : (
        <ul className="sc-blocks" aria-label={`What blocks ${versionLabel(c)}`}>
          {blocked.map((b, i) => (
            <BlockItem key={`${b.gate}-${i}`} block={b} now={now} />
          ))}
        </ul>
      )}
    </div>
  );
}

function BlockItem({block, now}: {block: Block; now: number}) {
  return (
    <li className="sc-block">
      <span className="sc-gate">{block.gate}</span> <span className="sc-reason">{block.reason}</span>
      {block.message && <div className="sc-message">{block.message}</div>}
      {block.until && (
        <div className="sc-until">
          until{' '}
          <time dateTime={block.until} title={absolute(block.until)}>
            {absolute(block.until)}
          </time>{' '}
          ({relative(block.until, now)})
        </div>
      )}
    </li>
  );
}
