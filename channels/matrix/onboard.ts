/** What `switchboard onboard` asks for Matrix, and the `[channels.matrix]` table it writes. */
import { field, allowLines, allowQuestion, askSecret, list, q, type ChannelTable, type Prompt } from '../../src/setup/onboard.ts';
import { MatrixSchema } from './config.ts';

export async function onboard(ask: Prompt): Promise<ChannelTable> {
  const homeserver = await ask.text('Matrix: homeserver URL, e.g. https://matrix.example.org', '', field(MatrixSchema, 'homeserver'));
  const userId = await ask.text("Matrix: the bot's user id, e.g. @switchboard:example.org", '', field(MatrixSchema, 'user_id'));
  const login = await ask.text('Matrix: log in with an access_token or a password', 'access_token', (a) => (/^(access_token|password)$/.test(a) ? undefined : 'answer access_token or password'));
  const credential = await askSecret(ask, 
    `Matrix: environment variable for the ${login === 'password' ? 'password' : 'access token'}`,
    login === 'password' ? 'MATRIX_PASSWORD' : 'MATRIX_ACCESS_TOKEN',
    login === 'password' ? "the bot account's password" : "the bot account's access token (Element: Settings → Help & About → Access Token)",
  );
  const rooms = await ask.list('Matrix: rooms to join, comma-separated ids or aliases (empty = none; invites from allowed people are accepted)', [], field(MatrixSchema, 'rooms', '0'));
  const allow = await ask.list(allowQuestion('Matrix: user ids (e.g. @alice:example.org)'), []);
  return {
    lines: [`homeserver = ${q(homeserver)}`, `user_id = ${q(userId)}`, `${login} = "\${${credential.env}}"`, ...(rooms.length > 0 ? [`rooms = ${list(rooms)}`] : []), ...allowLines(allow, '@alice:example.org')],
    secrets: [credential],
  };
}
