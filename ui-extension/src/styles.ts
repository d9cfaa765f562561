// The extension's styles, injected once. Colours are CSS variables: light by default, dark when the
// system prefers it, and Argo CD's own theme class (theme-light / theme-dark on an ancestor, set
// from the user's preference) wins over both.

const LIGHT = `
  --sc-fg: #1f2933; --sc-muted: #5f6b7a; --sc-bg: #ffffff; --sc-card: #f6f8fa; --sc-border: #d0d7de;
  --sc-accent: #0b63c4; --sc-accent-fg: #ffffff; --sc-ok: #18794e; --sc-warn: #9a6700; --sc-bad: #c0362c;
  --sc-info-bg: #eaf2fd; --sc-bad-bg: #fdecea; --sc-ok-bg: #e6f4ea; --sc-overlay: rgba(15, 23, 42, 0.45);`;
const DARK = `
  --sc-fg: #e6edf3; --sc-muted: #9aa7b4; --sc-bg: #0f1419; --sc-card: #1b222b; --sc-border: #36414d;
  --sc-accent: #58a6ff; --sc-accent-fg: #0b1117; --sc-ok: #3fb950; --sc-warn: #d29922; --sc-bad: #f47067;
  --sc-info-bg: #15263d; --sc-bad-bg: #3a1d1b; --sc-ok-bg: #14301f; --sc-overlay: rgba(0, 0, 0, 0.6);`;

export const CSS = `
.stagecoach {${LIGHT} }
@media (prefers-color-scheme: dark) { .stagecoach {${DARK} } }
.theme-light .stagecoach {${LIGHT} }
.theme-dark .stagecoach {${DARK} }
.stagecoach { color: var(--sc-fg); background: var(--sc-bg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; padding: 12px; }
/* Argo CD colours its headings (teal, 3:1 on white); the tab's keep the tab's text colour. */
.stagecoach h2 { font-size: 16px; margin: 0; color: var(--sc-fg); }
.stagecoach h3 { font-size: 14px; margin: 0; color: var(--sc-fg); }
/* Argo CD styles every code element as a light box (its Foundation base): the tab's follow its theme. */
.stagecoach code { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 13px; background: var(--sc-bg); color: var(--sc-fg); border: 1px solid var(--sc-border); border-radius: 3px; padding: 0 4px; }
.stagecoach .sc-muted { color: var(--sc-muted); }
.stagecoach .sc-head { display: flex; align-items: center; gap: 12px; margin-bottom: 10px; flex-wrap: wrap; }
.stagecoach .sc-service { color: var(--sc-accent); }
.stagecoach .sc-viewer { margin-left: auto; }
.stagecoach .sc-pipeline { display: flex; gap: 28px; list-style: none; padding: 0; margin: 0 0 16px; overflow-x: auto; align-items: stretch; }
/* A card keeps its 260 px: long names, digests and messages wrap inside it (a flex item would
   otherwise grow to its longest word and push the next card out of Argo CD's panel). */
.stagecoach .sc-pipeline > li { position: relative; flex: 0 0 260px; display: flex; min-width: 0; }
.stagecoach .sc-pipeline > li + li::before { content: "→"; position: absolute; left: -22px; top: 10px; color: var(--sc-muted); font-size: 18px; }
.stagecoach .sc-stage { flex: 1; min-width: 0; overflow-wrap: anywhere; background: var(--sc-card); border: 1px solid var(--sc-border); border-radius: 6px; padding: 10px 12px; display: flex; flex-direction: column; gap: 8px; }
.stagecoach .sc-stage--this { border-color: var(--sc-accent); box-shadow: 0 0 0 1px var(--sc-accent); }
.stagecoach .sc-stage-head { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
.stagecoach .sc-tag { font-size: 11px; border: 1px solid var(--sc-accent); color: var(--sc-accent); border-radius: 10px; padding: 0 6px; }
.stagecoach .sc-facts { display: grid; grid-template-columns: auto 1fr; gap: 2px 10px; margin: 0; }
.stagecoach .sc-facts dt { color: var(--sc-muted); }
.stagecoach .sc-facts dd { margin: 0; }
.stagecoach .sc-health { font-weight: 600; }
.stagecoach .sc-health--healthy { color: var(--sc-ok); }
.stagecoach .sc-health--progressing, .stagecoach .sc-health--unknown { color: var(--sc-warn); }
.stagecoach .sc-health--degraded { color: var(--sc-bad); }
.stagecoach .sc-health--frozen { color: var(--sc-accent); }
.stagecoach .sc-frozen { margin: 0; color: var(--sc-accent); }
.stagecoach .sc-held { margin: 0; color: var(--sc-bad); }
.stagecoach .sc-waves, .stagecoach .sc-records { margin: 0; padding-left: 16px; font-size: 13px; }
.stagecoach .sc-plan summary { cursor: pointer; color: var(--sc-muted); font-size: 13px; }
.stagecoach .sc-plan pre { white-space: pre-wrap; font-size: 12px; margin: 4px 0 0; }
.stagecoach .sc-candidate { border-top: 1px dashed var(--sc-border); padding-top: 6px; margin: 0; }
.stagecoach .sc-open { color: var(--sc-ok); margin: 2px 0 0; }
.stagecoach .sc-blocks { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-direction: column; gap: 4px; }
.stagecoach .sc-block { border-left: 3px solid var(--sc-warn); padding-left: 6px; }
.stagecoach .sc-gate { font-weight: 600; }
.stagecoach .sc-reason { color: var(--sc-warn); }
.stagecoach .sc-message, .stagecoach .sc-until { color: var(--sc-muted); font-size: 13px; }
.stagecoach .sc-actions { display: flex; flex-wrap: wrap; gap: 6px; margin-top: auto; }
.stagecoach .sc-btn { font: inherit; font-size: 13px; padding: 3px 10px; border-radius: 4px; border: 1px solid var(--sc-border); background: var(--sc-bg); color: var(--sc-fg); cursor: pointer; }
.stagecoach .sc-btn--primary { background: var(--sc-accent); color: var(--sc-accent-fg); border-color: var(--sc-accent); }
.stagecoach .sc-btn--small { padding: 0 6px; }
.stagecoach .sc-btn:disabled { opacity: 0.5; cursor: not-allowed; }
.stagecoach .sc-btn:focus-visible, .stagecoach .sc-link:focus-visible, .stagecoach input:focus-visible { outline: 2px solid var(--sc-accent); outline-offset: 2px; }
.stagecoach .sc-banner { display: flex; align-items: center; gap: 8px; padding: 6px 10px; border-radius: 4px; margin: 0 0 10px; }
.stagecoach .sc-banner--info { background: var(--sc-info-bg); }
.stagecoach .sc-banner--ok { background: var(--sc-ok-bg); }
.stagecoach .sc-banner--error { background: var(--sc-bad-bg); }
.stagecoach .sc-state { padding: 24px; text-align: center; }
.stagecoach .sc-state--error h2 { color: var(--sc-bad); }
.stagecoach .sc-history table { border-collapse: collapse; width: 100%; margin-top: 6px; }
.stagecoach .sc-history th, .stagecoach .sc-history td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--sc-border); vertical-align: top; }
.stagecoach .sc-history th { color: var(--sc-muted); font-weight: 600; }
/* The short columns keep their words whole; in By and the message long tokens (service accounts,
   digests, URLs) break anywhere so the table never grows past the tab, and a long message shows
   three lines, the rest on hover (title). */
.stagecoach .sc-history td:nth-child(-n+5) { white-space: nowrap; }
.stagecoach .sc-history td:nth-child(6) { overflow-wrap: anywhere; min-width: 10em; }
.stagecoach .sc-history__message { overflow-wrap: anywhere; min-width: 16em; }
.stagecoach .sc-clamp { display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 3; line-clamp: 3; overflow: hidden; }
.stagecoach .sc-row--rollback td:nth-child(3) { color: var(--sc-warn); font-weight: 600; }
.stagecoach .sc-phase--succeeded { color: var(--sc-ok); }
.stagecoach .sc-phase--failed, .stagecoach .sc-phase--rolledback, .stagecoach .sc-phase--aborted { color: var(--sc-bad); }
.stagecoach .sc-overlay { position: fixed; inset: 0; background: var(--sc-overlay); display: flex; align-items: center; justify-content: center; z-index: 1000; }
.stagecoach .sc-dialog { background: var(--sc-bg); color: var(--sc-fg); border: 1px solid var(--sc-border); border-radius: 8px; padding: 16px 20px; width: min(520px, 92vw); box-shadow: 0 10px 30px rgba(0,0,0,.3); }
.stagecoach .sc-effect { margin: 8px 0 12px; }
.stagecoach .sc-field { display: flex; flex-direction: column; gap: 2px; margin-bottom: 10px; }
.stagecoach .sc-field input { font: inherit; padding: 4px 6px; border: 1px solid var(--sc-border); border-radius: 4px; background: var(--sc-card); color: var(--sc-fg); }
.stagecoach .sc-refusal { background: var(--sc-bad-bg); color: var(--sc-fg); border-left: 3px solid var(--sc-bad); padding: 6px 10px; margin-bottom: 10px; }
.stagecoach .sc-dialog-buttons { display: flex; justify-content: flex-end; gap: 8px; }
/* In Argo CD's status panel: the padding of its items, and a label as its own (12 px, bold). */
.stagecoach.sc-panel { padding: 5px 20px; background: transparent; display: flex; flex-direction: column; }
.stagecoach .sc-panel-label { display: block; font-size: 12px; font-weight: 600; min-height: 18px; color: var(--sc-muted); }
.stagecoach .sc-link { background: none; border: 0; padding: 0; font: inherit; color: var(--sc-accent); cursor: pointer; text-align: left; }
.stagecoach .sc-link--bad { color: var(--sc-bad); }
`;

const STYLE_ID = 'stagecoach-extension-style';

export function ensureStyles(doc: Document = document): void {
  if (doc.getElementById(STYLE_ID)) return;
  const el = doc.createElement('style');
  el.id = STYLE_ID;
  el.textContent = CSS;
  doc.head.appendChild(el);
}
