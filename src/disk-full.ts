/**
 * Telling a write refused for lack of space from other failures, by the error's code. Shared
 * by the store (src/store/storage.ts tracks the full state) and by channels that answer a full
 * disk themselves (the webhook's 507, the terminal's notice), which need nothing else of the store.
 */

/** The codes that mean "no space": SQLite's and the operating system's. */
export type DiskFullCode = 'SQLITE_FULL' | 'ENOSPC' | 'EDQUOT';

/** Which disk-full code `error` carries (SQLITE_FULL, ENOSPC, EDQUOT), if any. */
export function diskFullCode(error: unknown): DiskFullCode | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  if (code.startsWith('SQLITE_FULL')) return 'SQLITE_FULL';
  if (code === 'ENOSPC' || code === 'EDQUOT') return code;
  return undefined;
}
