import {act, fireEvent, render, screen, waitFor, within} from '@testing-library/react';
import {describe, expect, it} from 'vitest';
import {Client, appRef} from '../src/api';
import {READ_ONLY_WHY} from '../src/actions';
import {PromotionTab} from '../src/PromotionTab';
import {StatusPanelItem} from '../src/StatusPanel';
import {CSS} from '../src/styles';
import {app, fakeFetch, json, pipeline} from './fixtures';
import type {Pipeline} from '../src/types';

function setup(routes: Parameters<typeof fakeFetch>[0]) {
  const f = fakeFetch(routes);
  const client = new Client(appRef(app), {fetch: f.fetch});
  render(<PromotionTab application={app} client={client} pollMs={1e9} />);
  return f;
}

const servePipeline = (p: () => Pipeline = () => pipeline()) => ['GET /apps/argocd/shop-staging/pipeline', () => json(200, p())] as [string, () => Response];

describe('PromotionTab', () => {
  it('shows a loading state, then the stages left to right with version, health and since', async () => {
    setup([servePipeline()]);
    expect(screen.getByRole('status')).toHaveTextContent('Loading the pipeline');
    const list = await screen.findByRole('list', {name: 'Stages of shop, in promotion order'});
    const stages = within(list).getAllByRole('region');
    expect(stages.map((s) => s.getAttribute('aria-label'))).toEqual(['Stage dev', 'Stage staging', 'Stage prod']);
    const staging = stages[1];
    expect(staging).toHaveTextContent('v1.2.0');
    expect(staging).toHaveTextContent('Healthy');
    expect(within(staging).getByText('this Application')).toBeTruthy();
    expect(staging.querySelector('time')?.getAttribute('datetime')).toBe('2026-11-30T10:00:00Z');
    expect(stages[2]).toHaveTextContent('nothing deployed');
    expect(stages[2]).toHaveTextContent('Frozen: holiday freeze');
  });

  it('says exactly what blocks the candidate: gate, reason, message and until', async () => {
    setup([servePipeline()]);
    const blocks = await screen.findByRole('list', {name: 'What blocks v1.3.0'});
    const items = within(blocks).getAllByRole('listitem');
    expect(items).toHaveLength(2);
    expect(items[0]).toHaveTextContent('approval ApprovalRequired');
    expect(items[0]).toHaveTextContent('1 of 2 approvals from group release');
    expect(items[0]).not.toHaveTextContent('until');
    expect(items[1]).toHaveTextContent('window OutsideWindow');
    expect(items[1]).toHaveTextContent('until 2026-12-01 12:30 UTC');
  });

  it('shows a hold, waves (targets as lists or counts), records and the plan text when there are any', async () => {
    setup([
      servePipeline(() => {
        const p = pipeline();
        Object.assign(p.stages![1], {
          held: 'v1.2.1 failed verification; promote by hand to resume',
          plan: 'runs v1.2.0\ncandidate v1.3.0 waits for approval',
          waves: [
            {name: 'canary', phase: 'Succeeded', message: '', targets: ['eu-1'], completed: ['eu-1'], failed: []},
            {name: 'rest', phase: 'Running', message: 'one cluster failed', targets: 3, completed: 1, failed: 1},
          ],
          records: [{stream: 'shop/staging', seq: 7, ref: 'registry.example/records@sha256:77'}],
        });
        return p;
      }),
    ]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    expect(staging).toHaveTextContent('Automation held: v1.2.1 failed verification');
    expect(within(staging).getByRole('list', {name: 'Waves of staging'})).toHaveTextContent('canary: Succeeded (1/1)rest: Running (1/3, 1 failed) – one cluster failed');
    expect(within(staging).getByRole('list', {name: 'Records of staging'})).toHaveTextContent('record #7 registry.example/records@sha256:77');
    expect(staging.querySelector('details pre')?.textContent).toBe('runs v1.2.0\ncandidate v1.3.0 waits for approval');
  });

  it('lists recent promotions and rollbacks', async () => {
    setup([servePipeline()]);
    const table = await screen.findByRole('table');
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows.map((r) => within(r).getAllByRole('cell')[2].textContent)).toEqual(['Promote', 'Rollback', 'Promote']);
    expect(rows[1]).toHaveTextContent('errors spiked');
    expect(rows[2]).toHaveTextContent('verification check failed');
    // A long message is cut to a few lines on screen (CSS); its full text stays on hover.
    const message = within(rows[2]).getAllByRole('cell')[6].querySelector('.sc-clamp');
    expect(message).toHaveAttribute('title', message?.textContent ?? '');
    expect(message?.textContent).toContain('verification check failed');
  });

  it('promotes after a confirmation that says what will happen, then reloads', async () => {
    let promoted = false;
    const f = setup([
      servePipeline(() => {
        const p = pipeline();
        if (promoted) p.stages![1].promotions!.unshift({name: 'staging-v1.3.0', action: 'Promote', phase: 'Pending', tag: 'v1.3.0', digest: '', actor: 'alice', reason: 'ship it', startedAt: '', finishedAt: '', message: ''});
        return p;
      }),
      ['POST /stages/shop-staging/staging/promote', () => {
        promoted = true;
        return json(201, {kind: 'Promotion', namespace: 'shop-staging', name: 'staging-v1.3.0', message: 'waits for approval'});
      }],
    ]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    const promote = within(staging).getByRole('button', {name: 'Promote'});
    promote.focus();
    fireEvent.click(promote);
    const dialog = screen.getByRole('dialog', {name: 'Promote v1.3.0 to staging?'});
    expect(dialog).toHaveAccessibleDescription(/Creates a Promotion as alice that moves shop in staging .* to v1\.3\.0/);
    expect(f.calls.filter((c) => c.method === 'POST')).toHaveLength(0); // nothing before confirming
    expect(document.activeElement).toBe(within(dialog).getByRole('textbox', {name: 'Reason'}));
    fireEvent.change(within(dialog).getByRole('textbox', {name: 'Reason'}), {target: {value: 'ship it'}});
    fireEvent.click(within(dialog).getByRole('button', {name: 'Promote'}));
    await screen.findByText('Promotion shop-staging/staging-v1.3.0 created: waits for approval');
    expect(screen.queryByRole('dialog')).toBeNull();
    const post = f.calls.find((c) => c.method === 'POST')!;
    expect(post.body).toEqual({version: 'v1.3.0', reason: 'ship it'});
    expect(post.headers).toMatchObject({'Argocd-Application-Name': 'argocd:shop-staging', 'Argocd-Project-Name': 'shop'});
    await waitFor(() => expect(screen.getAllByRole('row')).toHaveLength(5));
    expect(screen.getAllByRole('row')[1]).toHaveTextContent('queued');
    expect(document.activeElement).toBe(within(staging).getByRole('button', {name: 'Promote'}));
  });

  it('Escape cancels the dialog without a request and gives focus back', async () => {
    const f = setup([servePipeline()]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    const rollback = within(staging).getByRole('button', {name: 'Rollback'});
    rollback.focus();
    fireEvent.click(rollback);
    const dialog = screen.getByRole('dialog');
    expect(within(dialog).getByRole('button', {name: 'Roll back'})).toBeDisabled(); // reason required
    fireEvent.keyDown(dialog, {key: 'Escape'});
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.activeElement).toBe(rollback);
    expect(f.calls.filter((c) => c.method === 'POST')).toHaveLength(0);
  });

  it('keeps Tab inside the dialog', async () => {
    setup([servePipeline()]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    fireEvent.click(within(staging).getByRole('button', {name: 'Approve'}));
    const dialog = screen.getByRole('dialog');
    const confirm = within(dialog).getByRole('button', {name: 'Approve'});
    const input = within(dialog).getByRole('textbox', {name: 'Comment'});
    confirm.focus();
    fireEvent.keyDown(dialog, {key: 'Tab'});
    expect(document.activeElement).toBe(input);
    fireEvent.keyDown(dialog, {key: 'Tab', shiftKey: true});
    expect(document.activeElement).toBe(confirm);
  });

  it("shows a refused Approve with the API server's reason inside the dialog", async () => {
    const why = 'approvals.stagecoach.dev is forbidden: User "eve" cannot create resource "approvals" in API group "stagecoach.dev" in the namespace "shop-staging"';
    setup([servePipeline(), ['POST /stages/shop-staging/staging/approve', () => json(403, {code: 403, reason: 'Forbidden', message: why})]]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    fireEvent.click(within(staging).getByRole('button', {name: 'Approve'}));
    fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', {name: 'Approve'}));
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent(`Refused (403): ${why}`);
    expect(screen.getByRole('dialog')).toBeTruthy();
  });

  it('says to log in again when the Argo CD session ended before an action, not that it was invalid', async () => {
    setup([servePipeline(), ['POST /stages/shop-staging/staging/approve', () => Promise.resolve(new Response('Auth cookie not found', {status: 400}))]]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    fireEvent.click(within(staging).getByRole('button', {name: 'Approve'}));
    fireEvent.click(within(screen.getByRole('dialog')).getByRole('button', {name: 'Approve'}));
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('Not logged in to Argo CD: Your Argo CD session has ended (Argo CD answered 400: Auth cookie not found). Log in again.');
    expect(alert).not.toHaveTextContent('Invalid');
  });

  it('after a refusal focus is back in the dialog and Escape still closes it', async () => {
    // The confirm button is disabled while the request runs, so the browser drops its focus to
    // <body>: found by the browser test, where Escape then did nothing.
    setup([servePipeline(), ['POST /stages/shop-staging/staging/approve', () => json(403, {code: 403, reason: 'Forbidden', message: 'no'})]]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    within(staging).getByRole('button', {name: 'Approve'}).focus();
    fireEvent.click(within(staging).getByRole('button', {name: 'Approve'}));
    const confirm = within(screen.getByRole('dialog')).getByRole('button', {name: 'Approve'});
    within(screen.getByRole('dialog')).getByRole('textbox').focus();
    fireEvent.click(confirm);
    (document.activeElement as HTMLElement).blur(); // what the browser does to a focused control it disables
    await screen.findByRole('alert');
    // The dialog moves focus in an effect after the refusal renders: wait for it (under load the
    // alert can be found before the effect ran).
    await waitFor(() => expect(document.activeElement).toBe(within(screen.getByRole('dialog')).getByRole('button', {name: 'Approve'})));
    (document.activeElement as HTMLElement).blur();
    fireEvent.keyDown(document.body, {key: 'Escape'});
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.activeElement).toBe(within(staging).getByRole('button', {name: 'Approve'}));
  });

  it('disables the buttons of an anonymous viewer and says why', async () => {
    setup([servePipeline(() => pipeline({viewer: {user: '', groups: [], readOnly: true}}))]);
    const staging = await screen.findByRole('region', {name: 'Stage staging'});
    for (const b of within(staging).getAllByRole('button')) {
      expect(b).toBeDisabled();
      expect(b).toHaveAttribute('title', READ_ONLY_WHY);
    }
    expect(screen.getByRole('note')).toHaveTextContent(READ_ONLY_WHY);
    expect(screen.getByText('anonymous (read-only)')).toBeTruthy();
  });

  const errorCases = [
    {name: 'network failure', answer: () => Promise.reject(new TypeError('Failed to fetch')), title: 'Stagecoach is not reachable', text: 'Failed to fetch'},
    {name: 'a 403 with its reason', answer: () => json(403, {code: 403, reason: 'Forbidden', message: 'Application argocd/shop-staging is not part of pipeline shop'}), title: 'Not allowed', text: 'not part of pipeline shop'},
    {name: 'an Application outside any pipeline', answer: () => json(404, {code: 404, reason: 'NotFound', message: 'no Stage applies Application argocd/shop-staging'}), title: 'No Stagecoach pipeline applies this Application', text: 'no Stage applies'},
    {name: 'a wrong proxy token', answer: () => json(401, {code: 401, reason: 'Unauthorized', message: 'missing or wrong bearer token'}), title: 'do not agree on the proxy token', text: 'wrong bearer token'},
    {name: "Argo CD's 400 before login", answer: () => Promise.resolve(new Response('Auth cookie not found', {status: 400})), title: 'Log in to Argo CD again', text: 'Auth cookie not found'},
    {name: "Argo CD's 401 for an expired session", answer: () => Promise.resolve(new Response('Invalid token', {status: 401})), title: 'Log in to Argo CD again', text: 'Invalid token'},
  ];
  for (const c of errorCases) {
    it(`shows an error state for ${c.name}, with Retry`, async () => {
      let n = 0;
      setup([['GET /pipeline', () => (n++ === 0 ? c.answer() : json(200, pipeline()))]]);
      const alert = await screen.findByRole('alert');
      expect(within(alert).getByRole('heading')).toHaveTextContent(c.title);
      expect(alert).toHaveTextContent(c.text);
      fireEvent.click(within(alert).getByRole('button', {name: 'Retry'}));
      await screen.findByRole('region', {name: 'Stage staging'});
    });
  }

  it('keeps the pipeline when a refresh fails and says so', async () => {
    let n = 0;
    setup([['GET /pipeline', () => (n++ === 0 ? json(200, pipeline()) : Promise.reject(new TypeError('Failed to fetch')))]]);
    await screen.findByRole('region', {name: 'Stage staging'});
    await act(async () => fireEvent.click(screen.getByRole('button', {name: 'Refresh'})));
    expect(await screen.findByRole('alert')).toHaveTextContent('Stagecoach is not reachable');
    expect(screen.getByRole('region', {name: 'Stage staging'})).toBeTruthy();
  });

  it('shows an empty pipeline', async () => {
    setup([servePipeline(() => pipeline({stages: []}))]);
    expect(await screen.findByText('The pipeline of shop has no Stages yet.')).toBeTruthy();
    expect(screen.getByText('No promotions yet.')).toBeTruthy();
  });
});

describe('themes', () => {
  it("follows Argo CD's theme class first, then the system preference", () => {
    expect(CSS).toMatch(/@media \(prefers-color-scheme: dark\) \{ \.stagecoach \{/);
    expect(CSS.indexOf('.theme-dark .stagecoach')).toBeGreaterThan(CSS.indexOf('prefers-color-scheme'));
    expect(CSS).toContain('.theme-light .stagecoach');
  });
  it('injects the styles once', async () => {
    setup([servePipeline()]);
    await screen.findByRole('region', {name: 'Stage staging'});
    render(<PromotionTab application={app} client={new Client(appRef(app), {fetch: fakeFetch([servePipeline()]).fetch})} pollMs={1e9} />);
    expect(document.querySelectorAll('style#stagecoach-extension-style')).toHaveLength(1);
  });
});

describe('StatusPanelItem', () => {
  it('sums up the stage and opens the flyout on click', async () => {
    let opened = 0;
    const client = new Client(appRef(app), {fetch: fakeFetch([servePipeline()]).fetch});
    render(<StatusPanelItem application={app} client={client} openFlyout={() => opened++} />);
    const button = await screen.findByRole('button', {name: 'staging v1.2.0 ← v1.3.0 (approval, window)'});
    fireEvent.click(button);
    expect(opened).toBe(1);
  });
  it('shows the stage moving on without the Application changing (it polls)', async () => {
    // The stage moves only once the first state was seen: under load several polls may pass
    // before the first assertion looks.
    let moved = false;
    const serve = () => {
      const p = pipeline();
      if (moved) {
        const staging = p.stages![1];
        staging.current = {tag: 'v1.3.0', digest: staging.candidate!.digest, since: '2026-12-01T12:00:00Z'};
        staging.candidate = null;
      }
      return p;
    };
    const client = new Client(appRef(app), {fetch: fakeFetch([servePipeline(serve)]).fetch});
    render(<StatusPanelItem application={app} client={client} pollMs={20} />);
    expect(await screen.findByRole('button', {name: 'staging v1.2.0 ← v1.3.0 (approval, window)'})).toBeTruthy();
    moved = true;
    expect(await screen.findByRole('button', {name: 'staging v1.3.0'}, {timeout: 5000})).toBeTruthy();
  });
  it('says when Stagecoach is not reachable', async () => {
    const client = new Client(appRef(app), {fetch: fakeFetch([['GET /pipeline', () => Promise.reject(new TypeError('x'))]]).fetch});
    render(<StatusPanelItem application={app} client={client} />);
    expect(await screen.findByRole('button', {name: 'not reachable'})).toHaveAttribute('title', expect.stringContaining('Stagecoach is not reachable'));
  });
});
