/**
 * The config as this program reads it: src/config's schema with every registered channel's
 * `[channels.<name>]` table (channels/registry.ts), and the loader for it. Everything in app/
 * (and the tests) loads config through here; src/ is given the schema, never the channels.
 */
import type * as v from 'valibot';
import { channelModules } from '../channels/registry.ts';
import type { ChannelModule } from '../src/channel-module.ts';
import { createConfigLoader } from '../src/config/load.ts';
import { configSchema } from '../src/config/schema.ts';

type Modules = typeof channelModules;
type SchemasOf<M extends readonly ChannelModule[]> = { readonly [E in M[number] as E['name']]: E['schema'] };

/** Each channel's table schema by name, in the registry's order. */
function channelSchemas<const M extends readonly ChannelModule[]>(modules: M): SchemasOf<M> {
  return Object.fromEntries(modules.map((module) => [module.name, module.schema])) as SchemasOf<M>;
}

/** The whole config file's schema (the docs test walks every key of it). */
export const ConfigSchema = configSchema(channelSchemas(channelModules));

/** The validated config, every channel's table typed. */
export type AppConfig = v.InferOutput<typeof ConfigSchema>;

/** The registered channels' names, in the registry's order. */
export type ChannelName = Modules[number]['name'];

export const { loadConfig, parseConfig } = createConfigLoader(ConfigSchema);

/** The registry, for the composition root and the commands that walk every channel. */
export { channelModules };

/** The module of a channel by name, if there is one. */
export function channelModule(name: string): ChannelModule | undefined {
  return (channelModules as readonly ChannelModule[]).find((module) => module.name === name);
}

export { ConfigError, EXIT_CONFIG, formatProblems, locateConfig, type ConfigProblem, type LoadOptions } from '../src/config/load.ts';
