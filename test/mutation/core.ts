// The safety core: the code the fleet's guarantees rest on, which mutation testing covers
// (docs/testing.md, "Mutation testing"). Globs from the repository's root.
export const SAFETY_CORE = [
  "src/rollout/**/*.ts",
  "src/placement/**/*.ts",
  "src/service/sharding.ts",
  "src/service/shard-lease.ts",
  "src/service/leader-election.ts",
  "src/sync/**/*.ts",
  "src/mirror/decide.ts",
  "src/admission/**/*.ts",
  "src/access/credential-binding.ts",
  "src/fleet/merge-patch.ts",
  "test/soak/checks.ts",
  "test/soak/observer.ts",
];
