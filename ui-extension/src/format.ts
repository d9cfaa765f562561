// Time and digest formatting; `now` is a parameter so tests can pin it.

export function shortDigest(d: string | undefined): string {
  if (!d) return '';
  const [algo, hex] = d.includes(':') ? d.split(':', 2) : ['', d];
  return `${algo ? algo + ':' : ''}${hex.slice(0, 12)}`;
}

export function versionLabel(v: {tag?: string; digest?: string} | null | undefined): string {
  if (!v) return '';
  return v.tag || shortDigest(v.digest);
}

export function parseTime(iso: string | undefined): number | null {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

// "5m ago", "in 2h 10m", "just now".
export function relative(iso: string | undefined, now: number = Date.now()): string {
  const t = parseTime(iso);
  if (t === null) return '';
  const diff = t - now;
  const abs = Math.abs(diff);
  if (abs < 45_000) return 'just now';
  const s = duration(abs);
  return diff < 0 ? `${s} ago` : `in ${s}`;
}

export function duration(ms: number): string {
  const m = Math.round(ms / 60_000);
  if (m < 60) return `${Math.max(m, 1)}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return m % 60 ? `${h}h ${m % 60}m` : `${h}h`;
  return `${Math.round(h / 24)}d`;
}

export function absolute(iso: string | undefined): string {
  const t = parseTime(iso);
  if (t === null) return '';
  return new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/:\d\dZ$/, ' UTC');
}
