package v1alpha1

// The one vocabulary of Stagecoach: every condition reason, gate name, gate reason, Promotion
// phase reason and event reason the controller, the CLI and the engines' notifications use.
// Tests and users rely on these names; nothing else in the code spells them out.

// Reasons of Stage conditions (Ready, Mediated, Verified, Stalled).
const (
	ReasonApplierReady       = "ApplierReady"
	ReasonApplierCheckFailed = "ApplierCheckFailed"
	ReasonApplierUnreadable  = "ApplierUnreadable"
	ReasonApplierUnlabelled  = "ApplierUnlabelled"
	ReasonApplierClaimed     = "ApplierClaimed"
	ReasonApplierMultiSource = "ApplierMultiSource"
	// ReasonApplierSourceNotFound: spec.applyRef.source names no source of the Application (or
	// more than one).
	ReasonApplierSourceNotFound = "ApplierSourceNotFound"
	// ReasonSourceUnpinned: a source of a multi-source Application besides the promoted one can
	// move (a branch, a tag, a chart version), so the digest alone does not decide what runs.
	ReasonSourceUnpinned       = "SourceUnpinned"
	ReasonApplierNotOCI        = "ApplierNotOCI"
	ReasonApplierNotAutomated  = "ApplierNotAutomated"
	ReasonApplierSuspended     = "ApplierSuspended"
	ReasonUpstreamUntrusted    = "UpstreamUntrusted"
	ReasonUpstreamUnreadable   = "UpstreamUnreadable"
	ReasonNotPublished         = "NotPublished"
	ReasonDependencyNotReady   = "DependencyNotReady"
	ReasonKubernetesVersion    = "KubernetesVersion"
	ReasonConditionNotMet      = "ConditionNotMet"
	ReasonTemplateStampFailure = "TemplateStampFailure"
	// ReasonApplierNotSupported: a kind Stagecoach cannot apply (yet) is never Ready.
	ReasonApplierNotSupported = "ApplierNotSupported"
	// ReasonApplierSetInvalid: spec.applyRef.set does not render or names a field the kind lacks.
	ReasonApplierSetInvalid = "ApplierSetInvalid"
	// ReasonApplierClusterScoped: spec.applyRef names a cluster-scoped kind; a Stage applies only
	// objects of its own namespace.
	ReasonApplierClusterScoped = "ApplierClusterScoped"
	// ReasonAuthorMissing: a Stage on a kind without a built-in observer names no spec.author,
	// so the controller cannot tell whether its author may write the applier.
	ReasonAuthorMissing = "AuthorMissing"
	// ReasonAuthorForbidden: spec.author may not patch the applier (SubjectAccessReview).
	ReasonAuthorForbidden = "AuthorForbidden"
	// Reasons of Guarded: the admission policies are enforced, some are missing (or not bound
	// to deny), or the controller may not read them.
	ReasonPoliciesInstalled  = "PoliciesInstalled"
	ReasonPoliciesMissing    = "PoliciesMissing"
	ReasonPoliciesUnreadable = "PoliciesUnreadable"
	// ReasonMediatedByVersion: Mediated=True for an applier given a chart version, not a digest
	// (applier.Applier.PinsTag) whose chart comes from the repository where the Stage's versions are
	// judged: the tag is resolved there before the write, at landing and while it runs.
	ReasonMediatedByVersion = "MediatedByVersion"
	// ReasonTagMoved: the tag a Promotion gave the engine points at another digest than the one
	// verified (pushed again): found when it landed, the Promotion fails and rolls back; found
	// while the verified version runs (or a HelmRelease's newest release is another chart), the
	// Stage is Mediated=False and automation holds.
	ReasonTagMoved = "TagMoved"
	// ReasonTagMismatch: before the write, the tag of a Promotion (or Rollback) given to the
	// engine as a chart version does not name the Promotion's digest where the engine pulls it:
	// the Promotion fails with nothing written.
	ReasonTagMismatch = "TagMismatch"
	// ReasonChartNotInRegistry: Mediated=False for an applier given a chart version whose chart
	// does not come from an OCI registry (an HTTPS Helm repository, a Git source): nothing ties the
	// version to a digest, so Promotions by version are refused.
	ReasonChartNotInRegistry = "ChartNotInRegistry"
	// ReasonChartRepositoryMismatch: Mediated=False for an applier given a chart version whose
	// chart repository is not the repository where the Stage's versions are judged.
	ReasonChartRepositoryMismatch = "ChartRepositoryMismatch"
	// ReasonUpstreamRepositoryMismatch: Ready=False for a Stage whose
	// spec.source.upstream.repository (what its applier renders) is not the repository the head of
	// its upstream chain offers versions of.
	ReasonUpstreamRepositoryMismatch = "UpstreamRepositoryMismatch"
	// ReasonCompletionFailed: spec.completion's failed rule matched.
	ReasonCompletionFailed = "CompletionFailed"
	// ReasonDependencyCycle: spec.dependsOn leads back to the Stage.
	ReasonDependencyCycle  = "DependencyCycle"
	ReasonDeadlineExceeded = "DeadlineExceeded"
	ReasonRolledBack       = "RolledBack"
	ReasonSuspended        = "Suspended"
	ReasonNotMediated      = "NotMediated"
	ReasonMediated         = "Mediated"
	ReasonVerified         = "Verified"
	// ReasonWavePlanRefused: the waves leave targets out (without allowPartial), are invalid, or
	// an Application's cluster cannot be found.
	ReasonWavePlanRefused = "WavePlanRefused"
	// ReasonWaveFailed: a wave had more failures than maxFailures, or passed its progressDeadline.
	ReasonWaveFailed = "WaveFailed"
	// ReasonTargetsUnlabelled: Applications an ApplicationSet generated for a fleet Stage lack
	// the Stage's label, so the Application guard does not cover them (Mediated=False).
	ReasonTargetsUnlabelled = "TargetsUnlabelled"
	// ReasonApplierRevertedByApplicationSet: the Application a Stage applies through was generated
	// by an ApplicationSet whose applicationset-controller would write its template back over the
	// digest Stagecoach writes (no spec.ignoreApplicationDifferences entry for that field).
	ReasonApplierRevertedByApplicationSet = "ApplierRevertedByApplicationSet"
	// ReasonAborted: an Abort Promotion cancelled the running one.
	ReasonAborted = "Aborted"
	// ReasonPreempted: a Rollback stopped the running promote, to write at once (issue 53).
	ReasonPreempted = "Preempted"
	// ReasonUpstreamStale: the newest trusted upstream record is older than
	// spec.source.upstreamRecords.maxAge (newer records may be withheld).
	ReasonUpstreamStale = "UpstreamStale"
)

// Reasons of Frozen, Promoting and of automation holds.
const (
	ReasonForeignWrite      = "ForeignWrite"
	ReasonFrozenByPromotion = "FrozenByPromotion"
	ReasonUnfrozen          = "Unfrozen"
	ReasonPromotionFailed   = "PromotionFailed"
	ReasonRollbackFailed    = "RollbackFailed"
	ReasonPromoting         = "Promoting"
	ReasonIdle              = "Idle"
	ReasonSuperseded        = "Superseded"
	ReasonCheckFailed       = "CheckFailed"
	// ReasonHeld: Stalled while automation holds after a failure, until a person promotes.
	ReasonHeld = "Held"
	// Reasons of a Freeze's Active condition.
	ReasonFreezeHolding     = "Holding"
	ReasonFreezeEnded       = "Ended"
	ReasonFreezeNotHonoured = "NotHonoured"
	// ReasonPassedByBreakGlass: a Promotion's BreakGlass condition.
	ReasonPassedByBreakGlass = "PassedByBreakGlass"
)

// Reasons an engine's observation gives for a running Promotion's version.
const (
	ReasonLanded              = "Landed"
	ReasonSyncFailed          = "SyncFailed"
	ReasonDegraded            = "Degraded"
	ReasonWaitingForSync      = "WaitingForSync"
	ReasonWaitingForHealth    = "WaitingForHealth"
	ReasonWaitingForReconcile = "WaitingForReconcile"
	ReasonWaitingForReady     = "WaitingForReady"
	ReasonWaitingForRevision  = "WaitingForRevision"
	ReasonWaitingForAttempt   = "WaitingForAttempt"
	ReasonRechecking          = "Rechecking"
)

// Gates named in status.candidate.blockedBy[].gate and Promotion.status.gates[].gate. Check
// verdicts are named GateCheckPrefix + the check's name.
const (
	GateAuto      = "auto"
	GateHold      = "hold"
	GateFreeze    = "freeze"
	GateSuspend   = "suspend"
	GateHistory   = "history"
	GateSource    = "source"
	GateSoak      = "soak"
	GateSignature = "signature"
	// GateAttestations: the in-toto attestations verify.attestations requires.
	GateAttestations = "attestations"
	GateWindow       = "window"
	GateApprovals    = "approvals"
	GateDependsOn    = "dependsOn"
	GatePrereqs      = "prerequisites"
	// GateMediated holds automation while something besides the digest decides what the
	// applier runs (Mediated=False); a person may still promote.
	GateMediated = "mediated"
	// GatePublished: a follower of upstream records promotes only a version its upstream's
	// records, read afresh, show verified.
	GatePublished = "published"
	// GateChecks: the checks before apply (promotion.checks) run once every other gate of a
	// starting promote passes; their verdicts are named GateCheckPrefix + the check's name.
	GateChecks      = "checks"
	GateCheckPrefix = "check/"
)

// Reasons of gate blocks.
const (
	// automation
	ReasonManual  = "Manual"
	ReasonSoaking = "Soaking"
	ReasonFrozen  = "Frozen"
	// approvals
	ReasonAwaitingApproval = "AwaitingApproval"
	// windows
	ReasonInvalidWindow      = "InvalidWindow"
	ReasonDenyWindow         = "DenyWindow"
	ReasonOutsideAllowWindow = "OutsideAllowWindow"
	// checks before apply
	ReasonChecksRunning = "ChecksRunning"
	// dependsOn
	ReasonDependencyMissing           = "DependencyMissing"
	ReasonDependencyNotVerified       = "DependencyNotVerified"
	ReasonDependencyVersionUnreadable = "DependencyVersionUnreadable"
	ReasonDependencyVersionTooOld     = "DependencyVersionTooOld"
	// sources
	ReasonSourceNotSupported    = "SourceNotSupported"
	ReasonRegistryUnreachable   = "RegistryUnreachable"
	ReasonRegistryUnauthorized  = "RegistryUnauthorized"
	ReasonRepositoryNotFound    = "RepositoryNotFound"
	ReasonCredentialsUnreadable = "CredentialsUnreadable"
	ReasonNoEligibleTag         = "NoEligibleTag"
	ReasonSourceInvalid         = "SourceInvalid"
	// git sources
	ReasonGitUnreachable   = "GitUnreachable"
	ReasonGitUnauthorized  = "GitUnauthorized"
	ReasonGitRefNotFound   = "GitRefNotFound"
	ReasonNoEligibleCommit = "NoEligibleCommit"
	// ReasonSourceRewound: the branch no longer contains the running commit (force-pushed);
	// automation never goes backwards.
	ReasonSourceRewound = "SourceRewound"
	// ReasonVersionKindMismatch: the source's versions are commits, the applier takes digests.
	ReasonVersionKindMismatch = "VersionKindMismatch"
	// promotion.git
	// ReasonApplierNotOnBranch: the applier does not sync promotion.git's repository and branch,
	// so what Stagecoach pushes would never run.
	ReasonApplierNotOnBranch = "ApplierNotOnBranch"
	// ReasonGitWriteFailed: the promotion could not be written (a file or images entry missing,
	// a commit of no branch, credentials refused); nothing was pushed.
	ReasonGitWriteFailed = "GitWriteFailed"
	// ReasonGitPushed: the Promotion's commit is on the environment's branch.
	ReasonGitPushed = "GitPushed"
	// ReasonPullRequestOpened, ReasonPullRequestMerged: the Promotion's pull request was opened,
	// merged. ReasonPullRequestRejected: it was closed without merging, conflicts with the branch,
	// or someone else pushed to it.
	ReasonPullRequestOpened   = "PullRequestOpened"
	ReasonPullRequestMerged   = "PullRequestMerged"
	ReasonPullRequestRejected = "PullRequestRejected"
	// signatures (the verifier's verdicts, and why there is none)
	ReasonSignatureVerified = "SignatureVerified"
	ReasonSignatureMissing  = "SignatureMissing"
	// ReasonAttestationMissing: no attestation of a required predicate type is attached to the digest.
	ReasonAttestationMissing = "AttestationMissing"
	// ReasonAttestationRefused: attestations of the type exist, but none is signed by a trusted
	// signer for this digest and meets the condition (or the condition errors).
	ReasonAttestationRefused = "AttestationRefused"
	// ReasonConditionInvalid: a CEL condition of verify.attestations does not compile.
	ReasonConditionInvalid        = "ConditionInvalid"
	ReasonSignatureInvalid        = "SignatureInvalid"
	ReasonImageNotFound           = "ImageNotFound"
	ReasonVerificationUnavailable = "VerificationUnavailable"
	ReasonKeysUnreadable          = "KeysUnreadable"
)

// Event reasons of promotion transitions (also sent to Flux and Argo CD notifications). A Stage's
// Ready changes are events too, with the Ready reason.
const (
	EventPromoted        = "Promoted"
	EventLanded          = "Landed"
	EventVerified        = "Verified"
	EventPromotionFailed = "PromotionFailed"
	EventRolledBack      = "RolledBack"
	EventFrozen          = "Frozen"
	EventSuperseded      = "Superseded"
	EventBreakGlass      = "BreakGlass"
	EventCheckFailed     = "CheckFailed"
	// EventAttested: a verified version's promotion attestation was attached (spec.attest).
	EventAttested = "Attested"
	// EventAttestationFailed: it could not be; the event says why and what to fix.
	EventAttestationFailed = "AttestationFailed"
)

// Actions of events (the events.k8s.io action field).
const (
	EventActionPromote   = "Promote"
	EventActionReconcile = "Reconcile"
)
