# frozen_string_literal: true

module Pyroscope
  # A Fiber created inside tag_wrapper (Fiber.new, Enumerator#next,
  # graphql-ruby's Dataloader, the async gem) starts with the labels of the
  # Fiber that created it, as a Python task starts with its creator's
  # context. Changing them inside it changes only its own.
  module FiberInherit
    # Fiber.new: the block first takes the creator's labels.
    module NewFiber
      def initialize(*args, **kw, &block)
        token = Native.labels_token
        return super if token.nil? || block.nil?

        super(*args, **kw) do |*values|
          Native.labels_restore(token)
          block.call(*values)
        end
      end
    end

    # Enumerator#next & co. make their Fiber in C: while they run, a Fiber
    # without labels of its own switched to takes the caller's (fiber_labels.c).
    module ExternalEnumerator
      %i[next peek next_values peek_values].each do |name|
        define_method(name) do
          token = Native.labels_token
          return super() if token.nil?

          before = Native.labels_pending(token)
          begin
            super()
          ensure
            Native.labels_pending(before)
          end
        end
      end
    end
  end
end

Fiber.prepend(Pyroscope::FiberInherit::NewFiber)
Enumerator.prepend(Pyroscope::FiberInherit::ExternalEnumerator)
