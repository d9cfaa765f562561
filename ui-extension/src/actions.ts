import type {ActionKind, Stage, Viewer} from './types';
import {shortDigest, versionLabel} from './format';

// What each button of a Stage does, whether it can be pressed and why not, what the confirmation
// says will happen, and the request body: pure functions, so tests can pin every sentence.

export type Field = 'reason' | 'comment' | 'until';

export interface ButtonState {
  action: ActionKind;
  label: string;
  enabled: boolean;
  why: string; // why it is disabled, or what it does
}

export const READ_ONLY_WHY =
  'Read-only: Stagecoach sees you as anonymous. Log in to Argo CD (SSO or a local account) to promote, approve, roll back or freeze.';

export function buttons(stage: Stage, viewer: Viewer | undefined): ButtonState[] {
  const cand = stage.candidate;
  const list: ButtonState[] = [
    cand
      ? {action: 'promote', label: 'Promote', enabled: true, why: `Promote ${versionLabel(cand)} to ${stageLabel(stage)}`}
      : {action: 'promote', label: 'Promote', enabled: false, why: 'No candidate: nothing newer is waiting for this stage.'},
    cand
      ? {action: 'approve', label: 'Approve', enabled: true, why: `Approve ${versionLabel(cand)} for ${stageLabel(stage)}`}
      : {action: 'approve', label: 'Approve', enabled: false, why: 'No candidate to approve.'},
    stage.current
      ? {action: 'rollback', label: 'Rollback', enabled: true, why: `Roll ${stageLabel(stage)} back from ${versionLabel(stage.current)}`}
      : {action: 'rollback', label: 'Rollback', enabled: false, why: 'Nothing is deployed here yet.'},
    stage.frozen
      ? {action: 'unfreeze', label: 'Unfreeze', enabled: true, why: `Let promotions reach ${stageLabel(stage)} again`}
      : {action: 'freeze', label: 'Freeze', enabled: true, why: `Stop promotions to ${stageLabel(stage)}`},
  ];
  if (viewer?.readOnly) return list.map((b) => ({...b, enabled: false, why: READ_ONLY_WHY}));
  return list;
}

export function stageLabel(s: Stage): string {
  return s.environment || s.name;
}

export interface Plan {
  title: string;
  effect: string;
  fields: Field[];
  required: Field[];
  confirm: string;
}

export function plan(action: ActionKind, stage: Stage, service: string, viewer?: Viewer): Plan {
  const where = `${stageLabel(stage)} (Stage ${stage.namespace}/${stage.name})`;
  const cand = stage.candidate;
  const who = viewer?.user ? ` as ${viewer.user}` : '';
  switch (action) {
    case 'promote': {
      const v = describeVersion(cand);
      const blocked = cand?.blocked?.length
        ? ` Its gates still apply (all but soak): today it would wait for ${cand.blocked.map((b) => b.gate).join(', ')}.`
        : ' No gate holds it back, so it starts as soon as nothing else runs on this Stage.';
      return {
        title: `Promote ${versionLabel(cand)} to ${stageLabel(stage)}?`,
        effect: `Creates a Promotion${who} that moves ${service} in ${where} to ${v}.${blocked}`,
        fields: ['reason'],
        required: [],
        confirm: 'Promote',
      };
    }
    case 'approve':
      return {
        title: `Approve ${versionLabel(cand)} for ${stageLabel(stage)}?`,
        effect: `Creates an Approval${who} of ${describeVersion(cand)} for ${where}. It approves that digest only; a different build needs its own approval.`,
        fields: ['comment'],
        required: [],
        confirm: 'Approve',
      };
    case 'rollback':
      return {
        title: `Roll ${stageLabel(stage)} back?`,
        effect: `Creates a rollback Promotion${who} that returns ${where} from ${describeVersion(stage.current)} to the last version it verified before. Rollbacks pass every gate, a freeze included.`,
        fields: ['reason'],
        required: ['reason'],
        confirm: 'Roll back',
      };
    case 'freeze':
      return {
        title: `Freeze ${stageLabel(stage)}?`,
        effect: `Creates a Freeze${who} on ${where}: no promotion, by hand or automatic, starts there until it ends or someone unfreezes it. What runs now keeps running, and rollbacks still pass.`,
        fields: ['reason', 'until'],
        required: ['reason'],
        confirm: 'Freeze',
      };
    case 'unfreeze':
      return {
        title: `Unfreeze ${stageLabel(stage)}?`,
        effect: `Ends the freeze on ${where}${stage.frozenReason ? ` ("${stage.frozenReason}")` : ''}: waiting promotions may land as soon as their gates open.`,
        fields: [],
        required: [],
        confirm: 'Unfreeze',
      };
  }
}

function describeVersion(v: {tag?: string; digest?: string} | null | undefined): string {
  if (!v) return 'nothing';
  if (v.tag && v.digest) return `${v.tag} (${shortDigest(v.digest)})`;
  return versionLabel(v);
}

export type Inputs = Partial<Record<Field, string>>;

export function body(action: ActionKind, stage: Stage, inputs: Inputs): object {
  const reason = inputs.reason?.trim() || undefined;
  switch (action) {
    case 'promote': {
      const c = stage.candidate;
      // The tag when there is one (what people read); the digest pins an untagged build.
      const pick = c?.tag ? {version: c.tag} : {digest: c?.digest ?? ''};
      return reason ? {...pick, reason} : pick;
    }
    case 'approve': {
      const comment = inputs.comment?.trim();
      return comment ? {digest: stage.candidate?.digest ?? '', comment} : {digest: stage.candidate?.digest ?? ''};
    }
    case 'rollback':
      return {reason: reason ?? ''};
    case 'freeze': {
      const until = inputs.until?.trim();
      return until ? {reason: reason ?? '', until} : {reason: reason ?? ''};
    }
    case 'unfreeze':
      return {};
  }
}

export function missing(p: Plan, inputs: Inputs): Field[] {
  return p.required.filter((f) => !inputs[f]?.trim());
}
