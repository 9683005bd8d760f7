/**
 * The HTTP gateway and what it serves besides the channels' own endpoints: the tools'
 * endpoints (which move to a rebuilt tool set), `POST /api/reload`, and the web console
 * (loaded on its first request, never at start). The gateway module itself (and node:http,
 * ~40 ms) is imported by the caller only when `[gateway]` is configured.
 */
import type { GatewayConfig } from '../../src/config/schema.ts';
import type { ChatPort, ConsoleDeps } from '../../src/console/deps.ts';
import type { Gateway, GatewayOptions } from '../../src/gateway/server.ts';
import { sendJson } from '../../src/http/json.ts';
import type { UpgradeRoute } from '../../src/route.ts';
import type { Logger } from '../../src/log.ts';
import { createToolsRoute } from '../../src/tools/sources.ts';
import { packageVersion } from '../../src/version.ts';
import { consoleStaticDir, lazyConsole } from '../console.ts';
import { createRouteTable, type Reloader, type RouteTable } from '../reload.ts';
import type { BuiltTools } from './tools.ts';

type GatewayModule = typeof import('../../src/gateway/server.ts');
type TokenGuard = ReturnType<GatewayModule['createTokenGuard']>;

export interface GatewayParts {
  readonly gateway: Gateway;
  readonly routes: RouteTable;
  /** One token check for the gateway's routes and the console's sign-in: one limit for every way in. */
  readonly tokenGuard: TokenGuard;
  readonly version: string | undefined;
  /** Serves a tool set's endpoints (/ws/tools, /api/tools) once committed. */
  stageToolRoutes(built: BuiltTools): { commit(): void };
}

/** What the gateway reports (`/healthz`, `/api/status`, `/metrics`): read only when asked, so the runtime may be built after it. */
export type GatewayStatus = Pick<GatewayOptions, 'health' | 'cluster' | 'metrics'>;

export interface GatewayDeps extends GatewayStatus {
  readonly module: GatewayModule;
  readonly config: GatewayConfig;
  readonly log: Logger;
}

/** Built before the channels (a channel may serve an endpoint on it), started once all are. */
export function openGateway({ module, config, log, ...status }: GatewayDeps): GatewayParts {
  const gatewayLog = log.child({ component: 'gateway' });
  const tokenGuard = module.createTokenGuard({ token: () => consoleToken(config), log: gatewayLog, trustedProxies: config.trusted_proxies });
  const version = packageVersion();
  const gateway = module.createGateway({
    listen: config.listen,
    ...(config.token === undefined ? {} : { token: config.token }),
    tokenGuard,
    log: gatewayLog,
    ...status,
    // `switchboard status` prints it on its first line.
    ...(version === undefined ? {} : { version }),
    maxBodyBytes: config.max_body_kb * 1024,
    maxConnections: config.max_connections,
  });
  const routes = createRouteTable(gateway);
  return {
    gateway,
    routes,
    tokenGuard,
    version,
    stageToolRoutes: (built) => {
      const staged = routes.stage('tools');
      if (built.remote) staged.routes.addUpgrade(afterBuiltIns(built, built.remote.route, gatewayLog));
      const route = createToolsRoute(built.sources);
      // The built-in tools load on first use: the list waits for them.
      staged.routes.addRoute({ ...route, handle: async (request, response, extra) => {
        await built.load();
        return route.handle(request, response, extra);
      } });
      return staged;
    },
  };
}

/** `POST /api/reload` (token), the same as SIGHUP and `switchboard reload`. */
export function addReloadRoute(routes: RouteTable, reloader: Reloader): void {
  const staged = routes.stage('reload');
  staged.routes.addRoute({
    method: 'POST',
    path: '/api/reload',
    auth: 'token',
    handle: async (_request, response) => {
      const result = await reloader.reload();
      sendJson(response, result.ok ? 200 : 422, result);
    },
  });
  staged.commit();
}

/** What the console reads that only the composition root has; the rest of ConsoleDeps is filled in here. */
export type ConsoleSources = Omit<ConsoleDeps, 'log' | 'token' | 'sessionMs' | 'trustedProxies' | 'tokenGuard' | 'staticDir' | 'maxJsonBytes' | 'chat'> & { readonly chat?: ChatPort | undefined };

/** Serves the web console at / — its code is imported on the first request, so `sources` is called then. */
export function serveConsole(parts: GatewayParts, config: GatewayConfig, log: Logger, sources: () => Promise<ConsoleSources>): void {
  parts.gateway.setFallback(
    lazyConsole(async () => {
      const { chat, ...rest } = await sources();
      return {
        log: log.child({ component: 'console' }),
        token: () => consoleToken(config),
        sessionMs: config.session_hours * 3_600_000,
        trustedProxies: config.trusted_proxies,
        tokenGuard: parts.tokenGuard,
        staticDir: consoleStaticDir(),
        maxJsonBytes: Math.min(64 * 1024, config.max_body_kb * 1024),
        ...rest,
        ...(chat ? { chat } : {}),
      };
    }),
  );
}

const consoleToken = (config: GatewayConfig): string | undefined => (config.token === undefined || config.token === '' ? undefined : config.token);

/**
 * The remote-tool socket, taken over once the built-in tools are loaded: they load on first use,
 * and a client that registered before them could take a built-in's name (the registry reserves
 * the names of the tools it can see), shadowing it or being shadowed without a word.
 */
function afterBuiltIns(built: BuiltTools, route: UpgradeRoute, log: Logger): UpgradeRoute {
  return {
    ...route,
    handle: (request, socket, head) => {
      built.load().then(
        () => route.handle(request, socket, head),
        (error: unknown) => {
          log.error({ err: error, path: route.path }, 'loading the built-in tools failed: the remote-tool client is disconnected (it may connect again)');
          socket.destroy();
        },
      );
    },
  };
}

