# frozen_string_literal: true

# The median of a list of numbers (the mean of the two middle ones for an
# even count): what the Ruby benchmarks report over their rounds.
def median(xs)
  s = xs.sort
  s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0
end
