# frozen_string_literal: true

# A tiny shop backend to profile: what `make demo-ruby` runs.
#
#   ruby examples/ruby/shop.rb [--seconds N] [--output-dir DIR]
#
# Two worker threads serve requests for two endpoints (/checkout and /cart)
# under Pyroscope.tag_wrapper(endpoint: ...). Each request runs two kinds of
# work that burn a fixed amount of their thread's CPU time, so the profile
# has a known shape (CPU of each function, callees included):
#
#   parse_order     ~55 %
#   price_cart      ~40 %
#   render_receipt   ~5 %  (/cart only, in a Fiber labelled step=receipt:
#                           labels follow the running Fiber)
#
# Settings not given here come from PYROSCOPE_* variables; profiles go to
# --output-dir (default ./pyroscope-profiles) unless PYROSCOPE_SERVER_ADDRESS
# names a server.

require "optparse"
require "pyroscope"

PARSE_S = 0.006 # CPU seconds per request
PRICE_S = 0.004
RECEIPT_S = 0.001
ORDER = "sku:A-100,qty:2,sku:B-220,qty:1,sku:C-310,qty:5,coupon:SPRING,ship:express"

def thread_cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

# Each kind of work loops on its own (no shared helper), so its CPU time is
# its own self time in the profile.
def parse_order(cpu_s)
  deadline = thread_cpu + cpu_s
  fields = 0
  while thread_cpu < deadline
    20.times do
      ORDER.split(",").each do |token|
        key, value = token.split(":", 2)
        fields += 1 if key && value
      end
    end
  end
  fields
end

def price_cart(cpu_s)
  deadline = thread_cpu + cpu_s
  total = 0.0
  while thread_cpu < deadline
    10.times { total += (100...400).step(3).sum { |cents| cents * 1.2 - (cents % 7) * 0.05 } }
  end
  total
end

def render_receipt(cpu_s)
  deadline = thread_cpu + cpu_s
  size = 0
  while thread_cpu < deadline
    size += (0...10).sum { |n| format("%3d x item-%03d %8.2f\n", n, n * 7, n * 1.25).size }
  end
  size
end

def handle_request(endpoint, receipts)
  Pyroscope.tag_wrapper({ "endpoint" => endpoint }) do
    parse_order(PARSE_S)
    price_cart(PRICE_S)
    receipts.resume if receipts
  end
end

def serve(endpoint, deadline)
  receipts = if endpoint == "/cart"
               Fiber.new { Pyroscope.tag_wrapper(step: "receipt") { loop { render_receipt(RECEIPT_S); Fiber.yield } } }
             end
  count = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    handle_request(endpoint, receipts)
    count += 1
  end
  count
end

options = { seconds: Float(ENV.fetch("SHOP_SECONDS", "5")) }
OptionParser.new do |o|
  o.on("--seconds N", Float, "how long to serve requests (default: $SHOP_SECONDS or 5)")
  o.on("--output-dir DIR", "where profiles go (default: $PYROSCOPE_OUTPUT_DIR or ./pyroscope-profiles)")
end.parse!(into: options)

Pyroscope.configure do |c|
  c.application_name = "shop.ruby" unless ENV.key?("PYROSCOPE_APPLICATION_NAME")
  c.output_dir = options[:"output-dir"] if options[:"output-dir"]
  unless options[:"output-dir"] || ENV.key?("PYROSCOPE_OUTPUT_DIR") || ENV.key?("PYROSCOPE_SERVER_ADDRESS")
    c.output_dir = "pyroscope-profiles"
  end
end

started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
deadline = started + options[:seconds]
served = %w[/checkout /cart].to_h { |e| [e, Thread.new { serve(e, deadline) }] }.transform_values(&:value)
Pyroscope.shutdown # the last period is written before exit
elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
puts format("shop: served %<n>d requests in %<s>.1f s (%<by>s)", n: served.values.sum, s: elapsed,
                                                                    by: served.map { |k, v| "#{k}: #{v}" }.join(", "))
