/** The matrix channel as one unit: what channels/registry.ts lists (see src/channel-module.ts). */
import { defineChannel } from '../../src/channel-module.ts';
import { MatrixSchema } from './config.ts';

export const matrix = defineChannel({
  name: 'matrix',
  schema: MatrixSchema,
  docs: 'docs/channels/matrix.md',
  create: async (section, { context }) => (await import('./index.ts')).createMatrixChannel(section, context),
  probe: async (section, timeoutMs) => (await import('./doctor.ts')).probe(section, timeoutMs),
  onboard: async (ask) => (await import('./onboard.ts')).onboard(ask),
});
