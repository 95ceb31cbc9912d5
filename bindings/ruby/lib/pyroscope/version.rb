# frozen_string_literal: true

module Pyroscope
  # The version of the pyroscope-native gem (not of the pyroscope gem whose
  # API it keeps: that one is PYROSCOPE_GEM_API).
  VERSION = "0.1.0"
  # The pyroscope gem release whose Ruby API this gem provides.
  PYROSCOPE_GEM_API = "1.1"
end
