#!/usr/bin/env bash
# Tries to build Argo CD v3.6.1's own web UI (the ui/ folder of its Go module) from the npm
# registry alone, into ~/.cache/stagecoach/argocd-ui-v3.6.1 (reused when present), for argocd-server's
# --staticassets. It prints that folder on success.
#
# Today it cannot succeed, and says why in a few seconds: v3.6.1's ui/ depends on argo-ui at a
# GitHub commit (f941b0a3), and the only argo-ui on npm, 1.0.0, is the old React 16 line (react-form,
# react-router-dom 4, rxjs 6, react-toastify 5). It lacks argo-ui/v2, src/styles/theme.scss and
# src/components/form/compat.tsx (webpack.config.js fails to load on the last), and the Form, Text,
# ReactForm, TextArea, FormFieldHOC, NestedForm and AppContextReact exports; its react-toastify 5
# imports react-dom's render, gone in React 19. Measured on 2 shared cores (load 10): install 21 s
# (665 MB node_modules), and with FORCE=1 the production webpack build stops after 13 min 50 s at
# 46 errors, peak RSS 1.7 GB. The e2e test therefore serves the extension's harness page instead
# (test/e2e/argocd_ui_test.go).
#
# ARGO_UI=<npm version or tarball URL> tries another argo-ui; FORCE=1 runs webpack even when
# argo-ui lacks what Argo CD imports (for the full error list); KEEP=1 keeps the work folder.
# Needs node, npm and the Go module cache holding github.com/argoproj/argo-cd/v3@v3.6.1
# (`make e2e-build` downloads it).
set -euo pipefail

version=v3.6.1
pnpm_version=12.3.4 # ui/package.json's packageManager
argo_ui=${ARGO_UI:-1.0.0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stagecoach/argocd-ui-$version

if [ -f "$cache/index.html" ]; then
	echo "$cache"
	exit 0
fi

modcache=$(GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3} go env GOMODCACHE)
src=$modcache/github.com/argoproj/argo-cd/v3@$version/ui
if [ ! -f "$src/package.json" ]; then
	echo "$src is missing: run \`make e2e-build\` (it downloads Argo CD $version's module) first" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/argocd-ui-$version.XXXXXX")
if [ "${KEEP:-}" != 1 ]; then trap 'rm -rf "$work"' EXIT; fi
echo "building Argo CD $version's UI in $work with argo-ui $argo_ui from npm" >&2
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
	echo "argo-ui $argo_ui from npm lacks ${missing[*]}, which Argo CD $version's UI imports: it needs argo-ui at the GitHub commit its package.json names, which npm does not serve (FORCE=1 runs webpack anyway)" >&2
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
rm -rf "$cache.tmp"
cp -r "$out" "$cache.tmp"
mv "$cache.tmp" "$cache"
du -sh "$cache" >&2
echo "$cache"
