import {render, screen} from '@testing-library/react';
import {execFileSync} from 'node:child_process';
import {mkdtemp, readFile, rm} from 'node:fs/promises';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import * as React from 'react';
import * as ReactDOM from 'react-dom';
import * as ReactJSXRuntime from 'react/jsx-runtime';
import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest';
import {app, json, pipeline} from './fixtures';

// The built script, as Argo CD loads it: a plain script that finds React in window globals.
let dir = '';
let code = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stagecoach-bundle-'));
  const out = join(dir, 'extension-stagecoach.js');
  // In a child process: esbuild refuses to run inside jsdom (its TextEncoder invariant).
  execFileSync(process.execPath, [join(__dirname, '..', 'build.mjs'), '--out', out], {stdio: 'pipe'});
  code = await readFile(out, 'utf8');
}, 60_000);
afterAll(() => rm(dir, {recursive: true, force: true}));

type W = Record<string, unknown>;

describe('the built bundle', () => {
  it.each([
    ['React core', '__CLIENT_INTERNALS_DO_NOT_USE_OR_WARN_USERS_THEY_CANNOT_UPGRADE'],
    ['the JSX runtime', 'react.transitional.element'],
    ['React DOM', 'react-dom'],
    ['the scheduler', 'unstable_scheduleCallback'],
    ['a development build', 'process.env.NODE_ENV'],
  ])('contains no %s', (_what, marker) => expect(code).not.toContain(marker));

  it('takes React and the JSX runtime from Argo CD globals', () => {
    expect(code).toContain('window.React');
    expect(code).toContain('window.ReactJSXRuntime');
    expect(code).not.toMatch(/^\s*(import|export)\b/m); // a plain script, not an ES module
  });

  it('is small', () => expect(code.length).toBeLessThan(64 * 1024));

  it('registers the Promotion tab on Applications and a status-panel item, and the tab renders', async () => {
    const w = window as unknown as W;
    const regs: {resource: unknown[][]; status: unknown[][]} = {resource: [], status: []};
    Object.assign(w, {
      React, ReactDOM, ReactJSXRuntime,
      extensionsAPI: {
        registerResourceExtension: (...a: unknown[]) => regs.resource.push(a),
        registerStatusPanelExtension: (...a: unknown[]) => regs.status.push(a),
      },
    });
    const fetchMock = vi.fn(async () => json(200, pipeline()));
    vi.stubGlobal('fetch', fetchMock);
    try {
      new Function(code)();
      expect(regs.resource).toHaveLength(1);
      expect(regs.resource[0].slice(1)).toEqual(['argoproj.io', 'Application', 'Promotion', {icon: 'fa fa-forward'}]);
      expect(regs.status).toHaveLength(1);
      expect(regs.status[0].slice(1, 3)).toEqual(['Promotion', 'stagecoach']);
      expect(typeof regs.status[0][3]).toBe('function');

      const Tab = regs.resource[0][0] as React.ComponentType<{resource: unknown; application: unknown; tree: unknown}>;
      render(<Tab resource={app} application={app} tree={{}} />);
      expect(await screen.findByRole('region', {name: 'Stage staging'})).toBeTruthy();
      expect(fetchMock).toHaveBeenCalledWith('/extensions/stagecoach/api/v1/apps/argocd/shop-staging/pipeline', expect.anything());
    } finally {
      vi.unstubAllGlobals();
      delete w.extensionsAPI;
    }
  });

  it('fails loudly, not silently, without the globals', () => {
    const w = window as unknown as W;
    delete w.React;
    delete w.ReactJSXRuntime;
    w.extensionsAPI = {registerResourceExtension: () => {}, registerStatusPanelExtension: () => {}};
    try {
      expect(() => new Function(code)()).toThrow(/window\.(ReactJSXRuntime|React) is missing/);
    } finally {
      delete w.extensionsAPI;
    }
  });
});
