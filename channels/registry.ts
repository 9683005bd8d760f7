/**
 * Every channel, one line each, in the order `[channels.*]` errors, `onboard` and `doctor`
 * list them. The composition root (app/) is given this list; src/ never sees it. Adding a
 * platform: a folder channels/<name>/ with a module.ts (docs/adding-a-channel.md), and its
 * line here.
 */
import { discord } from './discord/module.ts';
import { email } from './email/module.ts';
import { irc } from './irc/module.ts';
import { matrix } from './matrix/module.ts';
import { slack } from './slack/module.ts';
import { telegram } from './telegram/module.ts';
import { terminal } from './terminal/module.ts';
import { webhook } from './webhook/module.ts';

export const channelModules = [terminal, telegram, discord, slack, matrix, irc, email, webhook] as const;
