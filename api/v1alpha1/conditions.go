package v1alpha1

// Condition types of a Stage. Each appears at most once in status.conditions.
const (
	// ConditionReady summarises the Stage for people and for kstatus (kubectl wait --for=condition=Ready).
	ConditionReady = "Ready"
	// ConditionMediated is True when nothing but the promoted digest decides what the applier runs.
	ConditionMediated = "Mediated"
	// ConditionPromoting is True while a Promotion of the Stage is running.
	ConditionPromoting = "Promoting"
	// ConditionVerified is True when the current version landed and passed verification.
	ConditionVerified = "Verified"
	// ConditionFrozen is True while a Freeze or a foreign write holds the Stage.
	ConditionFrozen = "Frozen"
	// ConditionStalled is True when the Stage cannot make progress until its spec changes.
	ConditionStalled = "Stalled"
	// ConditionGuarded is True when the admission policies the Stage relies on (manifests/policies:
	// its applier's guard and the Promotion requester guard) are installed and bound to deny.
	ConditionGuarded = "Guarded"
)

// Condition types of a Promotion.
const (
	// PromotionConditionBreakGlass is True, for good, on a Promotion that passed a Freeze or the
	// time windows by break-glass: who asked, why, and what it passed.
	PromotionConditionBreakGlass = "BreakGlass"
)

// Condition types of a Freeze.
const (
	// FreezeConditionActive is True while the Freeze holds the Stages in its status.stages.
	FreezeConditionActive = "Active"
)

// Labels and annotations Stagecoach puts on the objects it creates and on appliers.
const (
	// PromotionStageLabel on a Promotion names its Stage, for selection.
	PromotionStageLabel = "stagecoach.dev/stage"
	// AutomaticLabel marks Promotions that automation created (they may be superseded).
	AutomaticLabel = "stagecoach.dev/automatic"
	// CreatedAtAnnotation is the exact creation time automation stamps on its Promotions, to
	// order those created in the same second.
	CreatedAtAnnotation = "stagecoach.dev/created-at"
	// FirstSeenAnnotation on an automatic Promotion is when its source first offered the version
	// (status.candidate.firstSeen, RFC 3339): DORA lead time starts there. The candidate's field
	// is gone once the Promotion exists, and a Promotion's metadata lasts as long as it does.
	FirstSeenAnnotation = "stagecoach.dev/first-seen"
	// RollbackOfAnnotation on a Rollback Promotion names the failed Promotion it undoes.
	RollbackOfAnnotation = "stagecoach.dev/rollback-of"
	// VersionAnnotation, PromotionAnnotation and PhaseAnnotation on an applier describe the
	// promotion in flight, for Argo CD notification templates.
	VersionAnnotation   = "stagecoach.dev/version"
	PromotionAnnotation = "stagecoach.dev/promotion"
	PhaseAnnotation     = "stagecoach.dev/phase"
	// AppliedAtAnnotation is when Stagecoach wrote the version to one Application of a fleet
	// rollout (RFC 3339): that target's own progress deadline counts from it.
	AppliedAtAnnotation = "stagecoach.dev/applied-at"
	// A check's run object carries its Stage (PromotionStageLabel), its Promotion's UID
	// (RunPromotionLabel), its check (RunCheckLabel) and the check's phase (RunPhaseLabel).
	RunPromotionLabel = "stagecoach.dev/promotion-uid"
	RunCheckLabel     = "stagecoach.dev/check"
	RunPhaseLabel     = "stagecoach.dev/check-phase"
)

// StageLabel is the label an applier must carry, set to the name of the Stage that applies through it.
const StageLabel = "stagecoach.dev/stage"

// ReconcileRequestAnnotation asks the controller to reconcile a Stage now; its value is copied to
// status.lastHandledReconcileAt once handled.
const ReconcileRequestAnnotation = "stagecoach.dev/requested-at"
