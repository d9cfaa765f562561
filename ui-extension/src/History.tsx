import {absolute, relative, versionLabel} from './format';
import {stageLabel} from './actions';
import type {PromotionEntry, Stage} from './types';

const MAX_ROWS = 20;

interface Row extends PromotionEntry {
  stage: string;
}

export function history(stages: Stage[]): Row[] {
  const rows: Row[] = [];
  for (const s of stages) for (const p of s.promotions ?? []) rows.push({...p, stage: stageLabel(s)});
  // Newest first; a Promotion not started yet (queued) sorts first.
  rows.sort((a, b) => (b.startedAt || '\uffff').localeCompare(a.startedAt || '\uffff'));
  return rows.slice(0, MAX_ROWS);
}

export function History({stages, now}: {stages: Stage[]; now: number}) {
  const rows = history(stages);
  return (
    <section className="sc-history" aria-label="Recent promotions and rollbacks">
      <h3>Recent promotions and rollbacks</h3>
      {rows.length === 0 ? (
        <p className="sc-muted">No promotions yet.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Stage</th>
              <th scope="col">Action</th>
              <th scope="col">Version</th>
              <th scope="col">Phase</th>
              <th scope="col">By</th>
              <th scope="col">Reason / message</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={`${r.stage}/${r.name}`} className={r.action === 'Rollback' ? 'sc-row--rollback' : undefined}>
                <td>
                  {r.startedAt ? (
                    <time dateTime={r.startedAt} title={absolute(r.startedAt)}>
                      {relative(r.startedAt, now)}
                    </time>
                  ) : (
                    <span className="sc-muted">queued</span>
                  )}
                </td>
                <td>{r.stage}</td>
                <td>{r.action}</td>
                <td title={r.digest || undefined}>
                  <code>{versionLabel(r)}</code>
                </td>
                <td>
                  <span className={`sc-phase sc-phase--${(r.phase || 'pending').toLowerCase()}`}>{r.phase || 'Pending'}</span>
                </td>
                <td>{r.actor}</td>
                <td className="sc-history__message">
                  <span className="sc-clamp" title={message(r)}>
                    {message(r)}
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function message(r: Row): string {
  return [r.reason, r.message].filter(Boolean).join(' – ');
}
