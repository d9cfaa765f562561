// The Stagecoach HTTP API v1 (its contract is shared with internal/api) and the few Argo CD model
// fields the extension reads.

export interface Viewer {
  user: string;
  groups: string[];
  readOnly: boolean;
}

export interface Version {
  tag: string;
  digest: string;
  since?: string;
}

export interface Block {
  gate: string;
  reason: string;
  message: string;
  until: string;
}

export interface Candidate {
  tag: string;
  digest: string;
  blocked: Block[] | null;
}

export interface PromotionEntry {
  name: string;
  action: string;
  phase: string;
  tag: string;
  digest: string;
  actor: string;
  reason: string;
  startedAt: string;
  finishedAt: string;
  message: string;
}

// The API sends the targets of a wave as lists of names; counts are accepted too.
export interface Wave {
  name: string;
  phase: string;
  message: string;
  targets: string[] | number | null;
  completed: string[] | number | null;
  failed: string[] | number | null;
}

export interface RecordRef {
  stream: string;
  seq: number;
  ref: string;
}

export type Health = 'Healthy' | 'Progressing' | 'Degraded' | 'Frozen' | 'Unknown' | string;

export interface Stage {
  namespace: string;
  name: string;
  environment: string;
  applier: {kind: string; namespace: string; name: string};
  current: Version | null;
  health: Health;
  ready: {status: string; reason: string; message: string};
  frozen: boolean;
  frozenReason: string;
  candidate: Candidate | null;
  held?: string; // why automation is held after a failure; "" when it is not
  plan?: string; // the `stagecoach plan` text of the Stage, one fact a line
  promotions: PromotionEntry[] | null;
  waves?: Wave[] | null;
  records?: RecordRef[] | null;
}

export interface Pipeline {
  service: string;
  viewer: Viewer;
  stages: Stage[] | null;
}

export type ActionKind = 'promote' | 'approve' | 'rollback' | 'freeze' | 'unfreeze';

export interface ActionResult {
  kind: string;
  namespace: string;
  name: string;
  message: string;
}

// What the extension reads of Argo CD's Application (ui/src/app/shared/models.ts).
export interface Application {
  metadata: {name: string; namespace?: string};
  spec: {project: string};
}
