#!/bin/sh
# Builds the krew archives of kubectl-sigscope and renders the krew template
# deploy/krew/sigscope.yaml for them, as krew-release-bot would for a release
# tagged VERSION.
#   usage: deploy/krew/archive.sh VERSION OUTDIR      (VERSION: vX.Y.Z)
# For each platform the template names (os_arch in its addURIAndSha URLs) it
# writes OUTDIR/kubectl-sigscope_VERSION_OS_ARCH.tar.gz: kubectl-sigscope
# (CGO_ENABLED=0, -trimpath, -ldflags "-s -w -X main.version=VERSION"), and
# the repository's LICENSE (Apache-2.0), which the template's files: install.
# Then OUTDIR/sigscope.yaml: the template with VERSION, the archives' GitHub
# release URIs and their real sha256, what the bot will submit once they are
# uploaded to the release VERSION; until then krew installs it from a file:
#   kubectl krew install --manifest=OUTDIR/sigscope.yaml \
#     --archive=OUTDIR/kubectl-sigscope_VERSION_linux_amd64.tar.gz
# The rendering (awk below) knows the two actions the template uses:
# .TagName and addURIAndSha, and its leading comment; anything else in
# braces fails. deploy/krew_test.go checks it renders byte for byte what Go's
# text/template, the bot's engine, does.
set -eu
GO=${GO:-go}
usage="usage: archive.sh VERSION OUTDIR (VERSION: vX.Y.Z)"
version=${1:?$usage}
out=${2:?$usage}
case $version in
v | *[!A-Za-z0-9.+-]* | [!v]* | v[!0-9]*)
	echo "archive.sh: VERSION $version: krew wants a semantic version with a leading v, such as v0.1.0" >&2
	exit 2
	;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
template=deploy/krew/sigscope.yaml

platforms=$(sed -n 's/.*addURIAndSha ".*_\([a-z0-9]*\)_\([a-z0-9]*\)\.tar\.gz".*/\1_\2/p' "$template")
if [ -z "$platforms" ]; then
	echo "archive.sh: $template names no archive (addURIAndSha \"..._OS_ARCH.tar.gz\")" >&2
	exit 1
fi

# krew-index wants a license in each archive; the manifest's files: name it.
license=LICENSE
if [ ! -f "$license" ]; then
	echo "archive.sh: no $license at the repository's root: $template installs it from each archive" >&2
	exit 1
fi

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

stage=$(mktemp -d)
trap 'rm -rf "$stage" "$out/sigscope.yaml.tmp"' EXIT
: >"$stage/sums"
for p in $platforms; do
	os=${p%_*}
	arch=${p#*_}
	name=kubectl-sigscope_${version}_${os}_${arch}.tar.gz
	mkdir "$stage/$p"
	echo "archive.sh: building $os/$arch" >&2
	if ! CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath \
		-ldflags "-s -w -X main.version=$version" \
		-o "$stage/$p/kubectl-sigscope" ./cmd/kubectl-sigscope; then
		echo "archive.sh: kubectl-sigscope does not build for $os/$arch (above), a platform $template names" >&2
		exit 1
	fi
	cp "$license" "$stage/$p/"
	tar -czf "$out/$name" -C "$stage/$p" kubectl-sigscope "$license"
	echo "$name $(sha256 "$out/$name")" >>"$stage/sums"
done

# krew-release-bot's addURIAndSha "URL" .TagName writes
# "uri: URL\n    sha256: SHA" with the tag expanded in URL; the comment
# {{/* ... */ -}} goes with the newline after it.
awk -v tag="$version" '
NR == FNR { sha[$1] = $2; next }
!started && /^[{][{]\/[*]/ { incomment = 1 }
incomment {
	if ($0 ~ /[*]\/ -[}][}]$/) { incomment = 0; started = 1 }
	next
}
{
	started = 1
	line = $0
	if (match(line, /[{][{] *addURIAndSha "[^"]*" +\.TagName *[}][}]/)) {
		url = substr(line, RSTART, RLENGTH)
		sub(/^[^"]*"/, "", url)
		sub(/".*$/, "", url)
		gsub(/[{][{] *\.TagName *[}][}]/, tag, url)
		name = url
		sub(/.*\//, "", name)
		if (!(name in sha)) {
			printf "archive.sh: %s:%d: %s was not built\n", FILENAME, FNR, name > "/dev/stderr"
			bad = 1
			exit
		}
		line = substr(line, 1, RSTART - 1) "uri: " url "\n    sha256: " sha[name] substr(line, RSTART + RLENGTH)
	}
	gsub(/[{][{] *\.TagName *[}][}]/, tag, line)
	if (index(line, "{{") || index(line, "}}")) {
		printf "archive.sh: %s:%d: a template action archive.sh does not render: %s\n", FILENAME, FNR, $0 > "/dev/stderr"
		bad = 1
		exit
	}
	print line
}
END {
	if (incomment && !bad) {
		printf "archive.sh: the leading comment does not end with */ -}}\n" > "/dev/stderr"
		bad = 1
	}
	exit bad
}' "$stage/sums" "$template" >"$out/sigscope.yaml.tmp"
mv "$out/sigscope.yaml.tmp" "$out/sigscope.yaml"
echo "archive.sh: wrote $out/sigscope.yaml and:" >&2
cut -d' ' -f1 "$stage/sums" | sed "s|^|  $out/|" >&2
