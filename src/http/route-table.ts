/**
 * Finding the route of a request by exact path and method, the same way for the gateway and
 * the console: an unknown path is a 404, a known path with another method a 405 with `Allow`.
 */
import type { HttpRoute } from '../route.ts';

/** The route, or why there is none (the status and the sentence to answer with). */
export type RouteMatch<R> = { readonly route: R } | { readonly status: 404 | 405; readonly error: string; readonly allow?: string };

export class RouteTable<R extends Pick<HttpRoute<never>, 'method' | 'path'>> {
  readonly #routes = new Map<string, Map<string, R>>();
  /** Names the table in errors, e.g. "gateway route". */
  readonly #what: string;

  constructor(what: string, routes: Iterable<R> = []) {
    this.#what = what;
    for (const route of routes) this.add(route);
  }

  /** Adds a route; a path not starting with "/" or a method + path registered twice is a TypeError. */
  add(route: R): void {
    if (!route.path.startsWith('/')) throw new TypeError(`${this.#what} path must start with "/", got ${JSON.stringify(route.path)}`);
    const byMethod = this.#routes.get(route.path) ?? new Map<string, R>();
    if (byMethod.has(route.method)) throw new TypeError(`${this.#what} ${route.method} ${route.path} is registered twice`);
    byMethod.set(route.method, route);
    this.#routes.set(route.path, byMethod);
  }

  /** Whether any route has this path. */
  has(path: string): boolean {
    return this.#routes.has(path);
  }

  match(method: string, path: string): RouteMatch<R> {
    const byMethod = this.#routes.get(path);
    if (!byMethod) return { status: 404, error: `no such endpoint: ${path}` };
    const route = byMethod.get(method);
    if (!route) return { status: 405, error: `${method} is not allowed on ${path}`, allow: [...byMethod.keys()].join(', ') };
    return { route };
  }
}
