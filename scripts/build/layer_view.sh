#!/bin/sh
# Builds one layer's include view for meson (see meson.build, "Layers"): a directory of symlinks
# that exposes to the layer's sources exactly the folders it may include, so that an upward (or
# sideways) include fails to compile.
#   layer_view.sh VIEW_DIR NAME=TARGET...
# Each NAME becomes VIEW_DIR/NAME -> TARGET (a folder or a file); NAME may contain slashes.
set -eu
view=$1
shift
rm -rf "$view"
mkdir -p "$view"
for entry in "$@"; do
  name=${entry%%=*}
  target=${entry#*=}
  mkdir -p "$view/$(dirname "$name")"
  ln -s "$target" "$view/$name"
done
