/**
 * The version of the shape of every `-o json` (and `-o yaml`) the CLI prints: each such document carries it
 * as `schemaVersion`, first, so a tool can check it before reading the rest. Raised when a field is removed
 * or changes its meaning; a field added keeps it.
 */
export const SCHEMA_VERSION = 1;
