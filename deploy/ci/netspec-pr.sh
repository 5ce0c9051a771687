#!/bin/sh
# netspec-pr.sh BASE: the pull-request checks of a repository of specs, the
# steps of deploy/ci/github-actions.yml and deploy/ci/gitlab-ci.yml. Run it
# in the checkout of the pull request's head, with BASE (the commit it is
# compared with) fetched:
#
#   1. netspec validate --locked TREE: the tree is valid and netspec.lock
#      records its allocations;
#   2. netspec render TREE --node N --out GOLDEN/N for every node: the
#      committed golden files are what the tree renders (fails, showing the
#      difference, when one is stale, missing or left over);
#   3. netspec diff --format markdown of BASE's tree against this one,
#      written to COMMENT for the CI job to post on the pull request.
#
# The comment is written whenever the tree is valid, also when the goldens
# are stale. Exit status: 0 all checks pass; 1 a check failed or an error.
#
# Settings, from the environment (paths relative to the repository's top):
#   NETSPEC               the netspec command (default: netspec)
#   NETSPEC_TREE          the spec tree (default: .); goldens inside it must
#                         be listed in its .netspecignore
#   NETSPEC_GOLDEN        the golden directory, one subdirectory per node
#                         (default: golden)
#   NETSPEC_NODES         the nodes to render, space separated (default: the
#                         subdirectories of NETSPEC_GOLDEN, which must then
#                         be as many as the tree's Node objects)
#   NETSPEC_RENDER_FLAGS  more flags for render, e.g. --dataplane ipvs
#   NETSPEC_COMMENT       where the markdown goes (default: netspec-diff.md)
set -eu

usage="usage: netspec-pr.sh BASE   (the commit the pull request is compared with)"
[ $# -eq 1 ] || { echo "$usage" >&2; exit 1; }
base=$1
netspec=${NETSPEC:-netspec}
tree=${NETSPEC_TREE:-.}
golden=${NETSPEC_GOLDEN:-golden}
render_flags=${NETSPEC_RENDER_FLAGS:-}
comment=${NETSPEC_COMMENT:-netspec-diff.md}

top=$(git rev-parse --show-toplevel) || { echo "netspec-pr: not in a git repository" >&2; exit 1; }
cd "$top"
git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
	{ echo "netspec-pr: base $base is not a commit here: fetch it (actions/checkout with fetch-depth: 0, GIT_DEPTH: 0 in GitLab)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== netspec validate --locked $tree"
"$netspec" validate --locked "$tree"

echo "== golden files in $golden/"
# failed holds the messages of the checks that failed; the comment is
# written all the same.
failed=
fail() { failed="$failed$*
"; }
nodes=${NETSPEC_NODES:-}
if [ -z "$nodes" ]; then
	for d in "$golden"/*/; do
		[ -d "$d" ] && nodes="$nodes $(basename "$d")"
	done
	# The count of the tree's Node objects, from validate's JSON report
	# (pretty printed, one "Kind": n a line).
	"$netspec" validate --output json "$tree" >"$tmp/validate.json"
	want=$(sed -n 's/^ *"Node": \([0-9][0-9]*\),\{0,1\}$/\1/p' "$tmp/validate.json")
	have=$(echo $nodes | wc -w)
	if [ "${want:-0}" -gt "$have" ]; then
		fail "netspec-pr: the tree has ${want:-0} Node objects, $golden/ has $have node directories (${nodes# }):
  render the new nodes with 'netspec render $tree --node NODE --out $golden/NODE' and commit $golden/"
	fi
fi
for n in $nodes; do
	# shellcheck disable=SC2086 # the flags are words
	"$netspec" render "$tree" --node "$n" --out "$golden/$n" $render_flags >/dev/null ||
		fail "netspec-pr: cannot render $golden/$n: if node $n left the tree, remove $golden/$n"
done
stale=$(git status --porcelain --untracked-files=all -- "$golden")
if [ -n "$stale" ]; then
	fail "netspec-pr: golden files are stale: they are not what the tree renders:
$stale
Render every node again ('netspec render $tree --node NODE --out $golden/NODE${render_flags:+ $render_flags}') and commit $golden/."
	git --no-pager diff --stat -- "$golden"
	git --no-pager diff -- "$golden" | head -n 200
fi
[ -n "$failed" ] || echo "ok: $(echo $nodes | wc -w) nodes, golden files up to date"

echo "== netspec diff --format markdown $base $tree"
mkdir "$tmp/base"
if ! git archive "$base" -- "$tree" 2>/dev/null | tar -x -C "$tmp/base" 2>/dev/null || [ ! -d "$tmp/base/$tree" ]; then
	printf '## netspec diff\n\nThe base (%s) has no tree at `%s`: nothing to compare.\n' "$base" "$tree" >"$comment"
elif ! "$netspec" diff --format markdown "$tmp/base/$tree" "$tree" >"$comment" 2>"$tmp/diff.err"; then
	cat "$tmp/diff.err" >&2
	{
		printf '## netspec diff\n\nNo diff: netspec cannot compare with the base (%s):\n\n```\n' "$base"
		sed "s|$tmp/base/||g" "$tmp/diff.err"
		printf '```\n'
	} >"$comment"
fi
echo "wrote $comment"

if [ -n "$failed" ]; then
	printf '%s' "$failed" >&2
	exit 1
fi
