import {describe, expect, it} from 'vitest';
import {READ_ONLY_WHY, body, buttons, missing, plan} from '../src/actions';
import {ApiError} from '../src/api';
import {relative, shortDigest} from '../src/format';
import {history} from '../src/History';
import {initialState, reducer, type State} from '../src/state';
import {summary} from '../src/StatusPanel';
import {app, pipeline} from './fixtures';
import type {Block, Stage} from '../src/types';

const [dev, staging, prod] = pipeline().stages!;
const alice = pipeline().viewer;

describe('buttons', () => {
  const cases = [
    {name: 'a stage with a candidate can be promoted and approved', stage: staging, enabled: ['promote', 'approve', 'rollback', 'freeze']},
    {name: 'a stage without a candidate can only be rolled back or frozen', stage: dev, enabled: ['rollback', 'freeze']},
    {name: 'a frozen empty stage can only be unfrozen', stage: prod, enabled: ['unfreeze']},
  ];
  for (const c of cases) {
    it(c.name, () => {
      const bs = buttons(c.stage, alice);
      expect(bs.filter((b) => b.enabled).map((b) => b.action)).toEqual(c.enabled);
      for (const b of bs.filter((b) => !b.enabled)) expect(b.why).not.toBe('');
    });
  }
  it('disables every button for an anonymous viewer and says why', () => {
    const bs = buttons(staging, {user: '', groups: [], readOnly: true});
    expect(bs.every((b) => !b.enabled && b.why === READ_ONLY_WHY)).toBe(true);
  });
});

describe('plan and body', () => {
  const cases = [
    {action: 'promote', stage: staging, inputs: {}, body: {version: 'v1.3.0'}, effect: /Promotion as alice .*shop-staging\/staging\) to v1\.3\.0 \(sha256:333333333333\).*approval, window/},
    {action: 'promote', stage: {...staging, candidate: {tag: '', digest: 'sha256:ff', blocked: [] as Block[]}} as Stage, inputs: {reason: ' hotfix '}, body: {digest: 'sha256:ff', reason: 'hotfix'}, effect: /No gate holds it back/},
    {action: 'approve', stage: staging, inputs: {comment: 'lgtm'}, body: {digest: staging.candidate!.digest, comment: 'lgtm'}, effect: /Approval as alice of v1\.3\.0 .* approves that digest only/},
    {action: 'rollback', stage: staging, inputs: {reason: 'errors'}, body: {reason: 'errors'}, effect: /from v1\.2\.0 .* last version it verified before/},
    {action: 'freeze', stage: dev, inputs: {reason: 'release', until: '4h'}, body: {reason: 'release', until: '4h'}, effect: /no promotion, by hand or automatic, starts there/},
    {action: 'unfreeze', stage: prod, inputs: {}, body: {}, effect: /Ends the freeze on prod .*"holiday freeze"/},
  ] as const;
  for (const c of cases) {
    it(`${c.action} on ${c.stage.name} says what happens and sends ${JSON.stringify(c.body)}`, () => {
      expect(plan(c.action, c.stage, 'shop', alice).effect).toMatch(c.effect);
      expect(body(c.action, c.stage, c.inputs)).toEqual(c.body);
    });
  }
  it('requires a reason to roll back and to freeze, not to promote', () => {
    expect(missing(plan('rollback', staging, 'shop'), {reason: '  '})).toEqual(['reason']);
    expect(missing(plan('freeze', staging, 'shop'), {})).toEqual(['reason']);
    expect(missing(plan('promote', staging, 'shop'), {})).toEqual([]);
  });
});

describe('reducer', () => {
  const loaded: State = {...initialState, loading: false, pipeline: pipeline()};
  const refused = new ApiError(403, 'Forbidden', 'cannot create approvals');
  type Case = {name: string; from: State; msgs: Parameters<typeof reducer>[1][]; check: (s: State) => void};
  const cases: Case[] = [
    {name: 'loaded clears a previous error', from: {...initialState, loadError: refused}, msgs: [{type: 'loaded', pipeline: pipeline()}], check: (s) => {
      expect(s.loadError).toBeNull();
      expect(s.loading).toBe(false);
    }},
    {name: 'a failed refresh keeps the pipeline', from: loaded, msgs: [{type: 'load'}, {type: 'loadFailed', error: refused}], check: (s) => {
      expect(s.pipeline?.service).toBe('shop');
      expect(s.loadError).toBe(refused);
    }},
    {name: 'open, type, submit, refused keeps the dialog with the refusal', from: loaded, msgs: [{type: 'open', action: 'approve', stage: staging}, {type: 'input', field: 'comment', value: 'x'}, {type: 'submit'}, {type: 'submitFailed', error: refused}], check: (s) => {
      expect(s.dialog?.error).toBe(refused);
      expect(s.dialog?.submitting).toBe(false);
      expect(s.dialog?.inputs).toEqual({comment: 'x'});
    }},
    {name: 'submitted closes the dialog and says what was created', from: loaded, msgs: [{type: 'open', action: 'promote', stage: staging}, {type: 'submit'}, {type: 'submitted', result: {kind: 'Promotion', namespace: 'shop-staging', name: 'staging-abc', message: 'queued'}}], check: (s) => {
      expect(s.dialog).toBeNull();
      expect(s.notice).toEqual({kind: 'ok', text: 'Promotion shop-staging/staging-abc created: queued'});
    }},
    {name: 'a dialog cannot be closed or edited while its request runs', from: loaded, msgs: [{type: 'open', action: 'rollback', stage: staging}, {type: 'submit'}, {type: 'close'}, {type: 'input', field: 'reason', value: 'late'}], check: (s) => {
      expect(s.dialog?.submitting).toBe(true);
      expect(s.dialog?.inputs).toEqual({});
    }},
    {name: 'freeze starts with a default of 2h', from: loaded, msgs: [{type: 'open', action: 'freeze', stage: dev}], check: (s) => expect(s.dialog?.inputs).toEqual({until: '2h'})},
    {name: 'an anonymous viewer cannot open a dialog', from: {...loaded, pipeline: pipeline({viewer: {user: '', groups: [], readOnly: true}})}, msgs: [{type: 'open', action: 'promote', stage: staging}], check: (s) => expect(s.dialog).toBeNull()},
  ];
  for (const c of cases) {
    it(c.name, () => c.check(c.msgs.reduce(reducer, c.from)));
  }
});

describe('format, history and summary', () => {
  const now = Date.parse('2026-12-01T12:00:00Z');
  it.each([
    ['2026-12-01T11:59:50Z', 'just now'],
    ['2026-12-01T11:55:00Z', '5m ago'],
    ['2026-12-01T12:30:00Z', 'in 30m'],
    ['2026-12-01T09:50:00Z', '2h 10m ago'],
    ['2026-11-28T12:00:00Z', '3d ago'],
    ['', ''],
    ['garbage', ''],
  ])('relative(%s) = %s', (iso, want) => expect(relative(iso, now)).toBe(want));

  it.each([
    ['sha256:0123456789abcdef', 'sha256:0123456789ab'],
    // A Git commit, the version of a Stage whose source is git.
    ['sha1:c8926ec405607f0c665b8f24011347615d8332de', 'sha1:c8926ec40560'],
  ])('shortens digest %s to %s', (digest, want) => expect(shortDigest(digest)).toBe(want));

  it('lists promotions and rollbacks of all stages, newest first', () => {
    expect(history(pipeline().stages!).map((r) => `${r.stage}:${r.action}`)).toEqual(['dev:Promote', 'staging:Rollback', 'staging:Promote']);
  });

  it("sums up this Application's stage for the status panel", () => {
    expect(summary(pipeline(), app)).toEqual({
      line: 'staging v1.2.0 ← v1.3.0 (approval, window)',
      title: 'shop: staging runs v1.2.0; candidate v1.3.0 waits for approval, window',
      bad: false,
    });
  });
});
