#!/usr/bin/env bash
# Builds one knative-fleet release, its three artifacts with one version, and pushes them only when asked:
#   - the npm package (npm pack: dist/ and fetch-kodata.sh; its dependencies are installed, not bundled),
#   - the image <image-repo>:<version> (scripts/build-image.sh, with an OCI archive beside the others),
#   - the Helm chart as an OCI artifact (helm package with version = appVersion = <version>; the chart's
#     image tag defaults to its appVersion, so the chart runs the image of the same release).
# The version is package.json's; package-lock.json and charts/knative-fleet/Chart.yaml (version and
# appVersion) must carry the same one, and so must the VERSION given (a git tag such as v0.1.0 or 0.1.0):
# on any disagreement it stops before building anything and says which file says what.
#
# Usage: scripts/release.sh [VERSION] [--push] [--out DIR] [--skip-image] [--kodata DIR]
#                           [--image-repo REPO] [--chart-repo oci://REGISTRY/PATH]
#   VERSION            the release being made, v-prefixed or not (default: package.json's version)
#   --push             publish: npm publish, image push, helm push. Without it the script stops before
#                      pushing and prints what it would push.
#   --out DIR          where the artifacts go, in npm/, image/ and chart/ (default:
#                      $TMPDIR/knative-fleet-release-VERSION)
#   --skip-image       build no image (the npm package and the chart only), e.g. where buildah is missing;
#                      refused with --push, which would publish an incomplete release
#   --kodata DIR       the image takes the Knative releases from DIR instead of fetching them
#   --image-repo REPO  default ghcr.io/knative-fleet/knative-fleet (the chart's image.repository default)
#   --chart-repo URL   default oci://ghcr.io/knative-fleet/charts
# Environment: HELM (default helm). Pushing uses the logins already made: npm's token (NODE_AUTH_TOKEN in
# an .npmrc), buildah's registry login (as root: the image is in root's storage), `helm registry login`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
helm=${HELM:-helm}
given=""
push=false
out=""
skip_image=false
kodata=""
image_repo=ghcr.io/knative-fleet/knative-fleet
chart_repo=oci://ghcr.io/knative-fleet/charts

log() { printf 'release: %s\n' "$*" >&2; }
die() {
  printf 'release: %s\n' "$*" >&2
  exit 1
}
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --push) push=true; shift ;;
    --out) out=$2; shift 2 ;;
    --skip-image) skip_image=true; shift ;;
    --kodata) kodata=$2; shift 2 ;;
    --image-repo) image_repo=$2; shift 2 ;;
    --chart-repo) chart_repo=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "release: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    *)
      [ -z "$given" ] || { echo "release: one VERSION only (got $given and $1)" >&2; exit 2; }
      given=$1; shift ;;
  esac
done

# ---- one version everywhere
json_field() { node -e 'const v = process.argv[2].split(".").reduce((o, k) => o?.[k], JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))); process.stdout.write(v === undefined ? "" : String(v))' "$1" "$2"; }
# A top-level scalar of Chart.yaml, quotes removed.
chart_field() { sed -n "s/^$1:[[:space:]]*[\"']\{0,1\}\([^\"'[:space:]]*\)[\"']\{0,1\}[[:space:]]*\$/\1/p" "$root/charts/knative-fleet/Chart.yaml" | head -n1; }

version=$(json_field "$root/package.json" version)
lock_version=$(json_field "$root/package-lock.json" version)
chart_version=$(chart_field version)
app_version=$(chart_field appVersion)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  die "package.json's version \"$version\" is not a release version (MAJOR.MINOR.PATCH[-PRERELEASE])"
disagree=()
[ "$lock_version" = "$version" ] || disagree+=("package-lock.json version $lock_version")
[ "$chart_version" = "$version" ] || disagree+=("charts/knative-fleet/Chart.yaml version $chart_version")
[ "$app_version" = "$version" ] || disagree+=("charts/knative-fleet/Chart.yaml appVersion $app_version")
if [ -n "$given" ] && [ "${given#v}" != "$version" ]; then disagree+=("the version given $given"); fi
if [ ${#disagree[@]} -gt 0 ]; then
  {
    echo "release: the versions disagree; package.json says $version, but:"
    printf '  %s\n' "${disagree[@]}"
    echo "Set one version in package.json, package-lock.json (npm version --no-git-tag-version X.Y.Z sets both)"
    echo "and Chart.yaml's version and appVersion, and tag that commit vX.Y.Z."
  } >&2
  exit 1
fi
if $push && $skip_image; then die "--push with --skip-image would publish a release without its image"; fi

out=${out:-${TMPDIR:-/tmp}/knative-fleet-release-$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)
image="$image_repo:$version"
chart_name=$(chart_field name)
log "knative-fleet $version into $out"

# ---- the npm package (prepack installs the dependencies if needed and builds dist/)
# npm's tarball and the chart's have the same name (knative-fleet-VERSION.tgz): one directory each.
mkdir -p "$out/npm" "$out/chart" "$out/image"
tarball="$out/npm/knative-fleet-$version.tgz"
rm -f "$tarball"
(cd "$root" && npm pack --silent --pack-destination "$out/npm" >/dev/null)
[ -s "$tarball" ] || die "npm pack wrote no $tarball"
# grep reads the whole listing (no -q): under pipefail, tar cut off by an early exit would fail the test.
if tar -tzf "$tarball" | grep '^package/node_modules/' >/dev/null; then
  die "$tarball bundles node_modules: the package must install its dependencies, not carry them"
fi
log "npm package $tarball ($(wc -c <"$tarball" | tr -d ' ') bytes)"

# ---- the image, tagged with the version
if $skip_image; then
  log "image: skipped (--skip-image)"
else
  build=(bash "$root/scripts/build-image.sh" --tag "$image" --archive "$out/image/knative-fleet-$version.oci.tar")
  [ -z "$kodata" ] || build+=(--kodata "$kodata")
  # buildah needs root; a runner with passwordless sudo (GitHub's) builds through it, keeping the environment.
  if [ "$(id -u)" != 0 ]; then build=(sudo -E "${build[@]}"); fi
  "${build[@]}" >/dev/null
  log "image $image (archive $out/image/knative-fleet-$version.oci.tar)"
fi

# ---- the chart, as an OCI artifact: version and appVersion the release's
chart="$out/chart/$chart_name-$version.tgz"
rm -f "$chart"
"$helm" package "$root/charts/knative-fleet" --version "$version" --app-version "$version" -d "$out/chart" >/dev/null
packaged=$("$helm" show chart "$chart")
grep -qx "version: $version" <<<"$packaged" || die "$chart: helm show chart gives no version $version"
grep -qxE "appVersion: \"?$version\"?" <<<"$packaged" || die "$chart: helm show chart gives no appVersion $version"
log "chart $chart"

# ---- push, only when asked
npm_tag=latest
case "$version" in *-*) npm_tag=next ;; esac
pushes=()
$skip_image || pushes+=("buildah push $image docker://$image")
pushes+=("helm push $chart $chart_repo" "npm publish $tarball --access public --tag $npm_tag")
if ! $push; then
  echo "Built knative-fleet $version in $out. Not pushed (no --push); with --push this would run:"
  printf '  %s\n' "${pushes[@]}"
  exit 0
fi

# Plain sudo, as the registry login was made (`sudo buildah login`): root's own auth file.
sudo_root=()
if [ "$(id -u)" != 0 ]; then sudo_root=(sudo); fi
# The npm package last: a version once published can never be published again; an image or a chart can.
log "pushing image $image"
"${sudo_root[@]}" buildah push --quiet "$image" "docker://$image" >&2
log "pushing chart to $chart_repo"
"$helm" push "$chart" "$chart_repo" >&2
log "publishing the npm package ($npm_tag)"
npm publish "$tarball" --access public --tag "$npm_tag" >&2
echo "Released knative-fleet $version: npm knative-fleet@$version, image $image, chart $chart_repo/$chart_name:$version"
