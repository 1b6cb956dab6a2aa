// A commit as people read it, cut to one of two lengths, each said once here. Where room is short (a table
// cell, a heading, plan's header line) it is git's default abbreviation, 7 characters. In a sentence (a
// message, an Event, a waiting reason, an error, a commit message) it is 12: unique in any fleet repository's
// history, and what a person searches the log and the hub for. Plan's comment shows both today, so one length
// would change what it prints.

/** A commit in a table cell or a heading: git's default abbreviation. */
export const shortCommit = (sha: string): string => sha.slice(0, 7);

/** A commit named in a sentence: a message, an Event, a waiting reason, an error. */
export const commitInMessage = (sha: string): string => sha.slice(0, 12);
