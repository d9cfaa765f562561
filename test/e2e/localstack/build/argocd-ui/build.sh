#!/usr/bin/env bash
# Builds Argo CD v3.6.1's own web UI (the ui/ folder of its Go module) into
# ~/.cache/stagecoach/argocd-ui-v3.6.1 (under $STAGECOACH_CACHE when set; reused when present), for
# argocd-server's --staticassets, and prints that folder. The argo-ui commit it was built with is
# recorded beside it, in argocd-ui-v3.6.1.argo-ui (commit=, source=, built=, seconds=).
#
#   build.sh <argo-ui>     an argo-ui git checkout, or a bare git directory (a mirror or snapshot
#                          of github.com/argoproj/argo-ui): its HEAD is packed with `git archive`
#                          and installed in place of the commit ui/package.json pins. A folder that
#                          is not a git repository is packed as it is (commit recorded as unknown).
#   build.sh               without one, argo-ui comes from npm (ARGO_UI=<npm version or tarball
#                          URL>, default 1.0.0), and that cannot succeed: see below.
#
# Why it needs an argo-ui from outside npm: v3.6.1's ui/ depends on argo-ui at a GitHub commit
# (f941b0a3), and the only argo-ui on npm, 1.0.0, is the old React 16 line (react-form,
# react-router-dom 4, rxjs 6, react-toastify 5). It lacks argo-ui/v2, src/styles/theme.scss and
# src/components/form/compat.tsx (webpack.config.js fails to load on the last), and the Form, Text,
# ReactForm, TextArea, FormFieldHOC, NestedForm and AppContextReact exports; its react-toastify 5
# imports react-dom's render, gone in React 19. Measured on 2 shared cores (load 10): install 21 s
# (665 MB node_modules), and with FORCE=1 the production webpack build stops after 13 min 50 s at
# 46 errors, peak RSS 1.7 GB. So this script stops after the install, saying so. argo-ui's HEAD
# after its React 19 upgrade (2026-06-30, ad616de8) has all of it, and builds 36 MB: webpack took
# 115 s (peak RSS 2.5 GB) in one run, 22 min (peak RSS 1.8 GB) on 2 cores shared at load 23 in
# another, after a pnpm install of 10 s and 49 s.
#
# With a source given and a cache built from another commit, the cache is rebuilt. FORCE=1 runs
# webpack even when argo-ui lacks what Argo CD imports (for the full error list); KEEP=1 keeps the
# work folder. Needs git, node, npm and the Go module cache holding
# github.com/argoproj/argo-cd/v3@v3.6.1 (`make e2e-build` downloads it).
set -euo pipefail

version=v3.6.1
pnpm_version=12.3.4 # ui/package.json's packageManager
argo_ui_src=${1:-${ARGO_UI_SRC:-}}
cache=${STAGECOACH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach}/argocd-ui-$version
record=$cache.argo-ui

# What to build with: a commit of a local argo-ui, or a package npm resolves.
commit=
kind=
if [ -n "$argo_ui_src" ]; then
	[ -d "$argo_ui_src" ] || { echo "$argo_ui_src is not a folder: give an argo-ui checkout or git directory" >&2; exit 1; }
	argo_ui_src=$(cd "$argo_ui_src" && pwd -P)
	if [ "$(git -C "$argo_ui_src" rev-parse --is-bare-repository 2>/dev/null)" = true ]; then
		kind=bare
	elif [ "$(git -C "$argo_ui_src" rev-parse --show-toplevel 2>/dev/null)" = "$argo_ui_src" ]; then
		kind=checkout
	else
		kind=folder
	fi
	if [ "$kind" = folder ]; then
		commit=unknown
	else
		commit=$(git -C "$argo_ui_src" rev-parse HEAD)
	fi
	if [ "$kind" = bare ]; then
		name=$(git -C "$argo_ui_src" show HEAD:package.json 2>/dev/null | sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p' | head -1 || true)
	else
		name=$(sed -n 's/^ *"name": *"\([^"]*\)".*/\1/p' "$argo_ui_src/package.json" 2>/dev/null | head -1 || true)
	fi
	[ "$name" = argo-ui ] || { echo "$argo_ui_src holds no argo-ui (its package.json names \"$name\"): give a checkout of github.com/argoproj/argo-ui" >&2; exit 1; }
fi

if [ -f "$cache/index.html" ]; then
	built=$(sed -n 's/^commit=//p' "$record" 2>/dev/null || true)
	# Without a source, or with the commit it was built from, the cache is the answer.
	if [ -z "$commit" ] || { [ "$commit" != unknown ] && [ "$commit" = "$built" ]; }; then
		echo "$cache"
		exit 0
	fi
	echo "$cache was built with argo-ui ${built:-(not recorded)}; rebuilding with $commit from $argo_ui_src" >&2
fi

modcache=$(GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3} go env GOMODCACHE)
src=$modcache/github.com/argoproj/argo-cd/v3@$version/ui
if [ ! -f "$src/package.json" ]; then
	echo "$src is missing: run \`make e2e-build\` (it downloads Argo CD $version's module) first" >&2
	exit 1
fi

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/argocd-ui-$version.XXXXXX")
if [ "${KEEP:-}" != 1 ]; then trap 'rm -rf "$work"' EXIT; fi
if [ -n "$argo_ui_src" ]; then
	# pnpm installs a local package from a tarball whose files sit under package/, as npm packs it.
	tgz=$work/argo-ui.tgz
	case $kind in
	bare | checkout)
		[ "$kind" = checkout ] && [ -n "$(git -C "$argo_ui_src" status --porcelain --untracked-files=no)" ] &&
			echo "$argo_ui_src has uncommitted changes: only its HEAD ($commit) is used" >&2
		git -C "$argo_ui_src" archive --format=tar.gz --prefix=package/ -o "$tgz" HEAD
		;;
	folder) tar -czf "$tgz" --exclude=./node_modules --exclude=./.git --transform 's|^\./|package/|' -C "$argo_ui_src" . ;;
	esac
	argo_ui=file:$tgz
	echo "building Argo CD $version's UI in $work with argo-ui $commit from $argo_ui_src" >&2
else
	argo_ui=${ARGO_UI:-1.0.0}
	echo "building Argo CD $version's UI in $work with argo-ui $argo_ui from npm" >&2
fi
cp -r "$src" "$work/ui"
chmod -R u+w "$work/ui"
cd "$work/ui"
# Only the argo-ui dependency changes: the rest installs as pnpm-lock.yaml pins it.
sed -i "s|\"argo-ui\": \"git+https://github.com/argoproj/argo-ui.git#[0-9a-f]*\"|\"argo-ui\": \"$argo_ui\"|" package.json
grep -q "\"argo-ui\": \"$argo_ui\"" package.json || { echo "$src/package.json no longer names argo-ui as a git URL: update $0" >&2; exit 1; }
# argo-ui 1.0.0 brings fontawesome 5, whose install script pnpm refuses unless it is named.
sed -i "s|^allowBuilds:|allowBuilds:\n  '@fortawesome/fontawesome-free': false|" pnpm-workspace.yaml

npm install --silent --no-audit --no-fund --prefix "$work/pnpm" "pnpm@$pnpm_version" >&2
pnpm=$work/pnpm/node_modules/.bin/pnpm
timed() { if [ -x /usr/bin/time ]; then /usr/bin/time -f "$1: %e s, peak RSS %M KiB" "${@:2}"; else "${@:2}"; fi; }
timed "pnpm install" "$pnpm" install --no-frozen-lockfile --store-dir "$work/store" --reporter=silent >&2

missing=()
for f in v2/index.ts src/styles/theme.scss src/components/form/compat.tsx; do
	[ -e "node_modules/argo-ui/$f" ] || missing+=("$f")
done
if [ ${#missing[@]} -gt 0 ] && [ "${FORCE:-}" != 1 ]; then
	if [ -n "$argo_ui_src" ]; then
		echo "argo-ui $commit from $argo_ui_src lacks ${missing[*]}, which Argo CD $version's UI imports: give an argo-ui from after its React 19 upgrade (FORCE=1 runs webpack anyway)" >&2
	else
		echo "argo-ui $argo_ui from npm lacks ${missing[*]}, which Argo CD $version's UI imports: it needs argo-ui at the GitHub commit its package.json names, which npm does not serve. Give an argo-ui checkout or git directory: $0 <path> (FORCE=1 runs webpack anyway)" >&2
	fi
	exit 2
fi
if [ ${#missing[@]} -gt 0 ]; then
	# The alias webpack.config.js resolves at load time; drop it so webpack reports every missing piece.
	sed -i "s|'react-form': require.resolve('argo-ui/src/components/form/compat.tsx'),||" src/app/webpack.config.js
fi
NODE_ENV=production timed "webpack (production)" node_modules/.bin/webpack --config ./src/app/webpack.config.js --mode production >&2
# webpack.config.js (in src/app) writes to ../../dist/app: ui/dist/app.
out=$work/ui/dist/app
[ -f "$out/index.html" ] || { echo "webpack wrote no $out/index.html" >&2; exit 1; }
mkdir -p "$(dirname "$cache")"
rm -rf "$cache.tmp" "$cache.old"
cp -r "$out" "$cache.tmp"
{
	echo "commit=${commit:-npm:$argo_ui}"
	echo "source=${argo_ui_src:-npm}"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "seconds=$(($(date +%s) - started))"
} >"$record.tmp"
if [ -e "$cache" ]; then mv "$cache" "$cache.old"; fi
mv "$cache.tmp" "$cache"
mv "$record.tmp" "$record"
rm -rf "$cache.old"
du -sh "$cache" >&2
echo "argo-ui ${commit:-$argo_ui} recorded in $record" >&2
echo "$cache"
