// The globals Argo CD's UI provides to extensions (ui/src/app/index.tsx), for the browser harness.
import * as React from 'react';
import * as ReactDOM from 'react-dom';
import * as ReactDOMClient from 'react-dom/client';
import * as ReactJSXRuntime from 'react/jsx-runtime';

window.React = React;
window.ReactDOM = ReactDOM;
window.ReactJSXRuntime = ReactJSXRuntime;
// Not an Argo CD global: the harness renders the registered tab with it.
window.HarnessReactDOMClient = ReactDOMClient;
