import {PromotionTab} from './PromotionTab';
import {PromotionFlyout, StatusPanelItem} from './StatusPanel';
import type {Application} from './types';

// Argo CD ≥ 3.5 loads every extension-*.js after its own bundle and gives it window.extensionsAPI
// (ui/src/app/shared/services/extensions-service.ts).
interface ExtensionsAPI {
  registerResourceExtension(component: unknown, group: string, kind: string, tabTitle: string, opts?: {icon?: string}): void;
  registerStatusPanelExtension(component: unknown, title: string, id: string, flyout?: unknown): void;
}

// A resource tab gets {resource, tree, application}; on an Application's own tab both are the App.
function PromotionResourceTab(props: {resource?: Application; application?: Application}) {
  const app = props.application ?? props.resource;
  if (!app) return null;
  return <PromotionTab application={app} />;
}

export function register(api: ExtensionsAPI | undefined): boolean {
  if (!api) {
    console.error('Stagecoach extension: window.extensionsAPI is missing; Argo CD older than 2.6?');
    return false;
  }
  api.registerResourceExtension(PromotionResourceTab, 'argoproj.io', 'Application', 'Promotion', {icon: 'fa fa-forward'});
  api.registerStatusPanelExtension(StatusPanelItem, 'Promotion', 'stagecoach', PromotionFlyout);
  return true;
}

register((window as unknown as {extensionsAPI?: ExtensionsAPI}).extensionsAPI);
