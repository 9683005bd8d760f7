/** Reading a file the agent sends (the send_file tool), for channels that upload bytes. */
import { readFile } from 'node:fs/promises';
import { SendError, type OutboundFile } from '../channel.ts';

/** The file's bytes; a file that cannot be read is a permanent send error (retrying cannot help). */
export async function readOutboundFile(file: OutboundFile): Promise<Buffer> {
  try {
    return await readFile(file.path);
  } catch (error) {
    throw new SendError(`cannot read ${file.name}: ${error instanceof Error ? error.message : String(error)}`, { permanent: true, cause: error });
  }
}
