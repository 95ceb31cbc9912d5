# frozen_string_literal: true

module Pyroscope
  # The Rails hook of the pyroscope gem: every controller action runs under
  # the label action="<controller_name>/<action_name>".
  module RailsHook
    # The around_action callback, for ActionController::Base and ::API.
    AROUND_ACTION = lambda do |controller, action|
      Pyroscope.tag_wrapper({ "action" => "#{controller.controller_name}/#{controller.action_name}" },
                            &action)
    end

    module_function

    # Installs the callback once per controller base class present.
    def install
      installed = []
      %w[Base API].each do |name|
        next unless defined?(::ActionController) && ::ActionController.const_defined?(name, false)

        base = ::ActionController.const_get(name, false)
        next if (@installed ||= []).include?(base)

        base.__send__(:around_action, AROUND_ACTION)
        @installed << base
        installed << base
      end
      installed
    end

    # Defines Pyroscope::Railtie once Rails is loaded: at require time (as
    # the pyroscope gem's Engine was) or, when pyroscope was required
    # first, at configure. Its after_initialize installs the hook when the
    # configure block left autoinstrument_rails on (the default); Rails runs
    # an after_initialize added after initialisation at once.
    def define_railtie
      return if Pyroscope.const_defined?(:Railtie, false) || !defined?(::Rails::Railtie)

      # A class statement, so Rails sees a named Railtie from the start.
      Pyroscope.module_eval(<<~RUBY, __FILE__, __LINE__ + 1)
        class Railtie < ::Rails::Railtie
          config.after_initialize do
            settings = ::Pyroscope.current_config
            ::Pyroscope.initialize_rails_hooks if settings&.autoinstrument_rails
          end
        end
      RUBY
    end
  end

  class << self
    # Adds the around_action hook (the pyroscope gem's public name for it).
    def initialize_rails_hooks
      RailsHook.install
    end
  end

  RailsHook.define_railtie
end
