// Package plan is Stagecoach's decision core: given a Stage, its Promotions and what the engine
// reports, it says what happens next and why. It is pure (no client, no clock of its own), so the
// reconciler, the CLI's `plan` and the UI all decide the same way, and every rule is table-tested.
package plan
