# frozen_string_literal: true

# Uploads through Ruby's own Net::HTTP when libcurl cannot be loaded.
#
# A slim image often has no libcurl.so.4. Then the core hands each upload
# request (already built: URL with the ingest query, headers, the raw
# gzip'ed pprof or OTLP body) to this module's thread, which sends it and
# returns the server's answer; retries, backoff and logging stay in the core
# (ext/pyroscope_native/sender.c has the native half). With libcurl present
# nothing here runs.
require "net/http"
require "uri"
require "pyroscope/native"

module Pyroscope
  module Sender
    REPLY_KEEP = 300 # the core keeps this many bytes of a reply
    @lock = Mutex.new
    @thread = nil
    @pid = nil

    class << self
      # Start the sender thread once per process, only without libcurl.
      def ensure_running
        @lock.synchronize do
          return if @thread&.alive? && @pid == Process.pid
          return if Native.libcurl_available?

          @pid = Process.pid
          @thread = Thread.new { run }
          @thread.name = "pyroscope-sender"
        end
      end

      # Whether the settings may upload (a server or an OTLP endpoint): only
      # then is libcurl looked for (writing to a folder never loads it).
      def uploads?(resolved)
        %w[server_address otlp_endpoint].any? { |k| !resolved[k].to_s.empty? }
      end

      # The thread does not exist in a forked child: start a new one if it ran.
      def after_fork_child
        @lock = Mutex.new
        return unless @thread

        @thread = nil
        ensure_running
      end

      def send_request(url, headers, body, user, password, timeout_s, connect_timeout_s, ca_file, ca_dir)
        uri = URI(url)
        if user.nil? && uri.user
          user = URI.decode_www_form_component(uri.user)
          password = URI.decode_www_form_component(uri.password || "")
        end
        http = Net::HTTP.new(uri.hostname, uri.port)
        http.open_timeout = connect_timeout_s
        http.read_timeout = timeout_s
        http.write_timeout = timeout_s
        if uri.scheme == "https"
          http.use_ssl = true
          http.ca_file = ca_file if ca_file
          http.ca_path = ca_dir if ca_dir
        end
        post = Net::HTTP::Post.new(uri.request_uri)
        headers.each { |name, value| post[name] = value }
        post.basic_auth(user, password || "") if user
        post.body = body
        res = http.start { |h| h.request(post) }
        [res.code.to_i, (res.body || "").b[0, REPLY_KEEP]]
      end

      private

      def run
        Native._relay_attach(true)
        loop do
          req = Native._relay_next(0.5)
          answer(req) if req
        end
      ensure
        Native._relay_attach(false)
      end

      def answer(req)
        id = req[0]
        status, reply = send_request(*req[1..])
        Native._relay_done(id, status, reply, nil, false)
      rescue OpenSSL::SSL::SSLError => e
        # A refused certificate does not go away by retrying.
        Native._relay_done(id, 0, "", "TLS: #{e.message}", e.message.include?("certificate verify failed"))
      rescue StandardError => e # any failure is the core's to count and retry
        Native._relay_done(id, 0, "", "#{e.class}: #{e.message}", false)
      end
    end
  end
end
