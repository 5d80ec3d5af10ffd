#!/usr/bin/env bash
# Install each built wheel into a fresh venv (iclr26-shared from dist/, everything else from
# PyPI), import it and run its console script's --help. Usage: check_dist.sh UV DIST MEMBER...
set -euo pipefail
uv=$1 dist=$2
shift 2
shared_wheel=$(ls "$dist"/iclr26_shared-*.whl)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for member in "$@"; do
  module=${member//-/_}
  wheel=$(ls "$dist"/iclr26_"$module"-*.whl)
  ls "$dist"/iclr26_"$module"-*.tar.gz >/dev/null
  venv="$work/$member"
  $uv venv --quiet --python 3.11 "$venv"
  $uv pip install --quiet --python "$venv/bin/python" "$shared_wheel" "$wheel"
  "$venv/bin/python" -c "import iclr26.$module as m; print('import iclr26.$module', m.__version__)"
  if [ "$member" = shared ]; then
    "$venv/bin/python" -m iclr26.shared.summary --help >/dev/null
  else
    "$venv/bin/iclr26-$member" --help >/dev/null
  fi
  echo "ok $member ($(basename "$wheel"))"
done
