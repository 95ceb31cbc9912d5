# frozen_string_literal: true

# `gem "pyroscope-native"` with Bundler.require loads the gem by its own
# name: the same as `require "pyroscope"`.
require "pyroscope"
