// Builds the extension bundle (and the browser harness's React globals) with esbuild.
//
// Argo CD ≥ 3.5 runs React 19 and hands it to extensions as window.React, window.ReactDOM and
// window.ReactJSXRuntime (ui/src/app/index.tsx). A second copy of React in the bundle, or a bundled
// jsx-runtime, breaks hooks and fails to load, so every import of react, react-dom or
// react/jsx-runtime resolves to those globals and nothing else of React may be bundled.
import * as esbuild from 'esbuild';
import {mkdir} from 'node:fs/promises';
import {dirname, join} from 'node:path';
import {fileURLToPath} from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export const BUNDLE = join(here, 'dist/resources/extension-stagecoach.js/extension-stagecoach.js');
export const HARNESS_GLOBALS = join(here, 'dist/harness/globals.js');

const GLOBALS = {
  react: 'React',
  'react-dom': 'ReactDOM',
  'react/jsx-runtime': 'ReactJSXRuntime',
};

export const argoGlobals = {
  name: 'argocd-globals',
  setup(build) {
    build.onResolve({filter: /^react(-dom)?(\/.*)?$/}, (args) => {
      const name = GLOBALS[args.path];
      if (!name) {
        return {errors: [{text: `${args.path} is not provided by Argo CD; import react, react-dom or react/jsx-runtime only`}]};
      }
      return {path: name, namespace: 'argocd-global'};
    });
    build.onLoad({filter: /.*/, namespace: 'argocd-global'}, (args) => ({
      contents: `if (!window.${args.path}) throw new Error('Stagecoach extension: window.${args.path} is missing (Argo CD 3.5 or newer provides it)');\nmodule.exports = window.${args.path};`,
      loader: 'js',
    }));
  },
};

export async function buildBundle({outfile = BUNDLE, minify = true} = {}) {
  await mkdir(dirname(outfile), {recursive: true});
  return esbuild.build({
    entryPoints: [join(here, 'src/index.tsx')],
    outfile,
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    jsx: 'automatic',
    minify,
    legalComments: 'none',
    plugins: [argoGlobals],
    metafile: true,
    logLevel: 'warning',
  });
}

// What Argo CD's index.tsx does, for the harness page: React 19 from node_modules as globals.
export async function buildHarnessGlobals({outfile = HARNESS_GLOBALS} = {}) {
  await mkdir(dirname(outfile), {recursive: true});
  return esbuild.build({
    entryPoints: [join(here, 'test/harness-globals.js')],
    outfile,
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    define: {'process.env.NODE_ENV': '"production"'},
    minify: true,
    logLevel: 'warning',
  });
}

// node build.mjs            the bundle and the harness globals under dist/
// node build.mjs --out F    only the bundle, to F (the bundle test builds its own copy)
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const i = process.argv.indexOf('--out');
  const outfile = i > 0 ? process.argv[i + 1] : BUNDLE;
  const r = await buildBundle({outfile});
  if (i < 0) await buildHarnessGlobals();
  const out = Object.entries(r.metafile.outputs)[0];
  console.log(`built ${out[0]} (${out[1].bytes} bytes)`);
}
