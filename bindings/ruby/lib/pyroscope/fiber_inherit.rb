# frozen_string_literal: true

require "pyroscope/main_ractor"

module Pyroscope
  # A Fiber created inside tag_wrapper (Fiber.new, Enumerator#next,
  # graphql-ruby's Dataloader, the async gem) starts with the labels of the
  # Fiber that created it, as a Python task starts with its creator's
  # context. Changing them inside it changes only its own. Main Ractor only
  # (main_ractor.rb); methods made with def, not define_method, whose
  # closure another Ractor may not call.
  module FiberInherit
    # Runs the block with the calling Fiber's labels (token) lent to a Fiber
    # without labels of its own that is switched to meanwhile (fiber_labels.c).
    def self.lending(token)
      before = Native.labels_pending(token)
      begin
        yield
      ensure
        Native.labels_pending(before)
      end
    end

    # Fiber.new: the block first takes the creator's labels.
    module NewFiber
      def initialize(*args, **kw, &block)
        token = Native.labels_token if block && MainRactor.current?
        return super if token.nil?

        super(*args, **kw) do |*values|
          Native.labels_restore(token)
          block.call(*values)
        end
      end
    end

    # Enumerator#next & co. make their Fiber in C: it borrows the caller's
    # labels while they run. (A string: def, with no closure.)
    module ExternalEnumerator
      %i[next peek next_values peek_values].each do |name|
        module_eval(<<~RUBY, __FILE__, __LINE__ + 1)
          def #{name}
            token = Native.labels_token if MainRactor.current?
            token ? FiberInherit.lending(token) { super } : super
          end
        RUBY
      end
    end
  end
end

Fiber.prepend(Pyroscope::FiberInherit::NewFiber)
Enumerator.prepend(Pyroscope::FiberInherit::ExternalEnumerator)
