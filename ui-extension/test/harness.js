// The browser harness's window.extensionsAPI: records what the bundle registers (same signatures as
// Argo CD's ui/src/app/shared/services/extensions-service.ts) and renders it for one Application.
(function () {
  const h = {registrations: {resource: [], statusPanel: []}, errors: [], rendered: false};
  window.harness = h;
  window.addEventListener('error', (e) => h.errors.push(String(e.message)));

  window.extensionsAPI = {
    registerResourceExtension(component, group, kind, tabTitle, opts) {
      h.registrations.resource.push({component, group, kind, tabTitle, opts});
    },
    registerStatusPanelExtension(component, title, id, flyout) {
      h.registrations.statusPanel.push({component, title, id, flyout});
    },
    registerSystemLevelExtension() {},
    registerAppViewExtension() {},
    registerTopBarActionMenuExt() {},
  };

  h.render = function (root) {
    const q = new URLSearchParams(location.search);
    const app = {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: {name: q.get('app') || 'demo', namespace: q.get('namespace') || 'argocd'},
      spec: {project: q.get('project') || 'default'},
    };
    const theme = q.get('theme') || 'light';
    const tab = h.registrations.resource.find(
      (r) => r.group === 'argoproj.io' && r.kind === 'Application' && r.tabTitle === (q.get('tab') || 'Promotion'),
    );
    const panel = h.registrations.statusPanel[0];
    const e = window.React.createElement;

    function Page() {
      const [flyout, setFlyout] = window.React.useState(false);
      return e(
        'div',
        // Argo CD wraps its layout in theme-light / theme-dark; "system" leaves it to the media query.
        {className: `harness-frame${theme === 'system' ? '' : ` theme-${theme}`}`},
        panel && e('div', {className: 'harness-panel'}, e(panel.component, {application: app, openFlyout: () => setFlyout(true)})),
        tab ? e(tab.component, {application: app, resource: app, tree: {nodes: []}}) : e('p', null, 'no Promotion tab registered'),
        flyout && panel && panel.flyout && e('div', {className: 'harness-flyout', 'data-testid': 'flyout'}, e(panel.flyout, {application: app, tree: {nodes: []}})),
      );
    }
    window.HarnessReactDOMClient.createRoot(root).render(e(Page));
    h.rendered = true;
  };
})();
