import {cleanup} from '@testing-library/react';
import {afterEach, expect} from 'vitest';

afterEach(() => cleanup());

// The four DOM matchers the tests use, instead of another dependency (@testing-library/jest-dom).
function text(el: Element): string {
  return (el.textContent ?? '').replace(/\s+/g, ' ').trim();
}

function matches(actual: string, want: string | RegExp): boolean {
  return typeof want === 'string' ? actual.includes(want) : want.test(actual);
}

expect.extend({
  toHaveTextContent(el: Element, want: string | RegExp) {
    const got = text(el);
    return {pass: matches(got, want), message: () => `expected element text ${JSON.stringify(got)} ${this.isNot ? 'not ' : ''}to contain ${want}`};
  },
  toBeDisabled(el: Element) {
    const pass = (el as HTMLButtonElement).disabled === true;
    return {pass, message: () => `expected ${el.outerHTML.slice(0, 120)} ${this.isNot ? 'not ' : ''}to be disabled`};
  },
  toHaveAttribute(el: Element, name: string, want?: unknown) {
    const got = el.getAttribute(name);
    const pass = got !== null && (want === undefined || this.equals(got, want));
    return {pass, message: () => `expected attribute ${name}=${JSON.stringify(got)} ${this.isNot ? 'not ' : ''}to be ${String(want)}`};
  },
  toHaveAccessibleDescription(el: Element, want: string | RegExp) {
    const ids = (el.getAttribute('aria-describedby') ?? '').split(/\s+/).filter(Boolean);
    const got = ids.map((id) => text(document.getElementById(id) ?? document.createElement('i'))).join(' ');
    return {pass: matches(got, want), message: () => `expected description ${JSON.stringify(got)} ${this.isNot ? 'not ' : ''}to match ${want}`};
  },
});

interface DomMatchers<R = unknown> {
  toHaveTextContent(want: string | RegExp): R;
  toBeDisabled(): R;
  toHaveAttribute(name: string, want?: unknown): R;
  toHaveAccessibleDescription(want: string | RegExp): R;
}

declare module 'vitest' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface Assertion<T = any> extends DomMatchers<T> {}
}
