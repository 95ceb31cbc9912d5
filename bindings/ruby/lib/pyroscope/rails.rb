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
  end

  class << self
    # Adds the around_action hook (the pyroscope gem's public name for it).
    # Called by the Railtie after Rails initialised when the configure
    # block left autoinstrument_rails on (the default).
    def initialize_rails_hooks
      RailsHook.install
    end
  end

  # Loaded with Rails (Bundler.require), as the pyroscope gem's Engine was.
  if defined?(::Rails::Railtie)
    class Railtie < ::Rails::Railtie
      config.after_initialize do
        settings = ::Pyroscope.current_config
        ::Pyroscope.initialize_rails_hooks if settings&.autoinstrument_rails
      end
    end
  end
end
