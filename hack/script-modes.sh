#!/usr/bin/env bash
# Checks that every script tracked by git is executable in git's index (mode
# 100755): a *.sh file, or any file starting with "#!", outside testdata. The
# Makefile and CI run scripts as commands, and a fresh clone takes its file modes
# from the index, so a script committed without +x fails there with "Permission
# denied" however it looks in one's own checkout. Run by hack/lint.sh.
#
# Usage: hack/script-modes.sh [DIR]   check the repository at DIR (default: this one)
# Fix with: git update-index --chmod=+x FILE (and chmod +x FILE)
set -euo pipefail
dir="${1:-$(dirname "$0")/..}"
cd "$dir"

status=0
while IFS= read -r -d '' entry; do
  mode="${entry%% *}"
  path="${entry#*$'\t'}"
  case "/$path" in
    */testdata/*) continue ;;
  esac
  script=false
  if [[ "$path" == *.sh ]]; then
    script=true
  elif [[ -f "$path" && "$(head -c 2 -- "$path")" == '#!' ]]; then
    script=true
  fi
  if [[ "$script" == true && "$mode" != 100755 ]]; then
    echo "script-modes: $path is not executable in git (mode $mode); run: git update-index --chmod=+x $path" >&2
    status=1
  fi
done < <(git ls-files -s -z)
exit "$status"
