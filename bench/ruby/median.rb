# frozen_string_literal: true

# The median of a list of numbers (the mean of the two middle ones for an
# even count): what the Ruby benchmarks report over their rounds.
def median(xs)
  s = xs.sort
  s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0
end

# A 95 % bootstrap interval of the median of xs: the 2.5th and 97.5th
# percentiles of the medians of 2000 resamples (with replacement, a fixed
# seed so a report can be reproduced from its rounds). Says how far the
# median of these rounds can be trusted: two medians whose intervals
# overlap are not told apart by the run.
def median_ci(xs, draws: 2000)
  return [Float::NAN, Float::NAN] if xs.empty?

  rng = Random.new(14)
  meds = Array.new(draws) { median(Array.new(xs.size) { xs[rng.rand(xs.size)] }) }.sort
  [meds[(draws * 0.025).floor], meds[(draws * 0.975).ceil - 1]]
end
